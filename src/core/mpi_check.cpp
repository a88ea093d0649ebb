#include "core/mpi_check.hpp"

#include <fmt/format.h>

namespace concord::detail {

void check_mpi(int rc, const char* call, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  if (rank < 0) rank = world_rank_or_unknown();
  throw Error(ErrorCode::MpiError, rank,
              fmt::format("{} failed: {}", call, std::string(text, static_cast<size_t>(length))));
}

int world_rank_or_unknown() noexcept {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return -1;
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void ensure_not_finalized(const char* what) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw Error(ErrorCode::Finalized, -1,
                fmt::format("{}: called after MPI_Finalize; concord needs a running MPI", what));
  }
}

}  // namespace concord::detail

// libconcord_mpi: MPI_Allreduce through concord for unmodified MPI programs.
// Loaded before the MPI library (LD_PRELOAD, or linked before -lmpi), these
// definitions take the application's calls through MPI's profiling interface;
// everything concord does not take goes to PMPI_Allreduce unchanged
// (docs/MPI_INTERPOSER.md). No exception leaves this file.
#include "comm_cache.hpp"
#include "guard.hpp"
#include "report.hpp"
#include "rules.hpp"

#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include <mpi.h>

#include <exception>
#include <new>
#include <type_traits>

#define CONCORD_MPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace concord::mpi_interposer {

thread_local bool InsideConcord::active_ CONCORD_MPI_HOT_TLS = false;

namespace {

int mpi_error_class(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::Mismatch:
      return MPI_ERR_ARG;
    case ErrorCode::Internal:
      return MPI_ERR_INTERN;
    case ErrorCode::MpiError:
    case ErrorCode::Finalized:
    case ErrorCode::SystemError:
    case ErrorCode::Shutdown:
    case ErrorCode::Timeout:
      return MPI_ERR_OTHER;
  }
  return MPI_ERR_UNKNOWN;
}

// PMPI_Allreduce, or PMPI_Allreduce_c for the large-count entry point.
template <typename Count>
int pmpi_allreduce(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm) {
  if constexpr (std::is_same_v<Count, int>) {
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  } else {
#if MPI_VERSION >= 4
    return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
#endif
  }
}

template <typename Count>
int run_in_concord(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, const Taken& call) noexcept {
  try {
    const InsideConcord guard;
    const CommRoute route = communicator_for(comm);
    if (route.communicator == nullptr) {
      count_passed(route.invalid ? PassReason::EmptyOrInvalid : PassReason::Intercommunicator);
      return pmpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    }
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    allreduce(send, recvbuf, static_cast<std::size_t>(count), call.dtype, call.op,
              *route.communicator);
    count_taken();
    return MPI_SUCCESS;
  } catch (const Error& e) {
    return raise_error(comm, mpi_error_class(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return raise_error(comm, MPI_ERR_NO_MEM, "concord_mpi: out of memory in MPI_Allreduce");
  } catch (const std::exception& e) {
    return raise_error(comm, MPI_ERR_INTERN, e.what());
  } catch (...) {
    return raise_error(comm, MPI_ERR_UNKNOWN, "concord_mpi: unknown error in MPI_Allreduce");
  }
}

// Both entry points: concord's own calls and what concord does not take go to MPI.
template <typename Count>
int interpose_allreduce(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm) {
  if (InsideConcord::active()) {
    count_passed(PassReason::ConcordInternal);
    return pmpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  announce_once();
  const Decision decision =
      decide(sendbuf, recvbuf, static_cast<long long>(count), datatype, op, comm);
  if (!decision.taken) {
    count_passed(decision.reason);
    return pmpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  return run_in_concord(sendbuf, recvbuf, count, datatype, op, comm, *decision.taken);
}

}  // namespace
}  // namespace concord::mpi_interposer

CONCORD_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count,
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return concord::mpi_interposer::interpose_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

#if MPI_VERSION >= 4
// The large-count binding of MPI 4 (MPICH 4; what mpi4py 4 calls where it exists).
CONCORD_MPI_EXPORT int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count,
                                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return concord::mpi_interposer::interpose_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
#endif

// Frees the cached Communicators while MPI still works, then finalizes.
CONCORD_MPI_EXPORT int MPI_Finalize(void) {
  using namespace concord::mpi_interposer;
  summarize();
  release_all();
  return PMPI_Finalize();
}

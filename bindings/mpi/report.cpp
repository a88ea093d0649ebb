#include "report.hpp"

#include "settings.hpp"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace concord::mpi_interposer {
namespace {

std::atomic<unsigned long long> taken{0};
std::array<std::atomic<unsigned long long>, static_cast<std::size_t>(PassReason::Count)> passed{};

bool world_rank_zero() noexcept {
  int initialized = 0;
  int finalized = 0;
  PMPI_Initialized(&initialized);
  PMPI_Finalized(&finalized);
  if (!initialized || finalized) return false;
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == 0;
}

}  // namespace

// Counted only for the verbose report, the one reader: otherwise a locked
// read-modify-write on every call for nothing.
void count_taken() noexcept {
  if (settings().verbose) taken.fetch_add(1, std::memory_order_relaxed);
}

void count_passed(PassReason reason) noexcept {
  if (settings().verbose) {
    passed[static_cast<std::size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  }
}

void announce_once() noexcept {
  // A function-local static: after the first call, one acquire load of its guard
  // (std::call_once would write thread-locals and call pthread_once every time).
  static const bool announced = [] {
    const Settings& s = settings();
    if (!world_rank_zero()) return true;
    if (!s.error.empty()) {
      std::fprintf(stderr,
                   "concord_mpi: %s; the interposer is off, every call goes to MPI unchanged\n",
                   s.error.c_str());
    } else if (s.verbose && !s.enabled) {
      std::fprintf(stderr, "concord_mpi: CONCORD_MPI_INTERPOSE=0: every call goes to MPI\n");
    } else if (s.verbose) {
      std::fprintf(stderr, "concord_mpi: %s; CONCORD_MPI_INTERPOSE_MIN_BYTES=%zu\n",
                   rules_summary(), s.min_bytes);
    }
    return true;
  }();
  (void)announced;
}

namespace {

// What summarize() prints: the calls taken, and those passed on by reason.
void print_summary() {
  std::string reasons;
  unsigned long long total_passed = 0;
  for (std::size_t i = 0; i < passed.size(); ++i) {
    const auto n = passed[i].load();
    if (n == 0) continue;
    total_passed += n;
    if (!reasons.empty()) reasons += ", ";
    reasons += to_string(static_cast<PassReason>(i));
    reasons += ": " + std::to_string(n);
  }
  std::fprintf(
      stderr,
      "concord_mpi: rank 0: MPI_Allreduce taken by concord: %llu, passed to MPI: %llu%s%s%s\n",
      taken.load(), total_passed, reasons.empty() ? "" : " (", reasons.c_str(),
      reasons.empty() ? "" : ")");
}

}  // namespace

void summarize() noexcept {
  if (!settings().verbose || !world_rank_zero()) return;
  try {
    print_summary();
  } catch (...) {  // no memory for the line: the counts are lost, not the process
    std::fputs("concord_mpi: rank 0: cannot print the interposer's summary\n", stderr);
  }
}

namespace {

// A new error code of `error_class` whose string MPI reads back as `probe`;
// nullopt where MPI cannot (MPICH 4.0.2 returns another code's text for added
// codes), or cannot add codes.
std::optional<int> added_code(int error_class) noexcept {
  int code = 0;
  if (PMPI_Add_error_code(error_class, &code) != MPI_SUCCESS) return std::nullopt;
  const char* probe = "concord_mpi: probe";
  char back[MPI_MAX_ERROR_STRING] = "";
  int length = 0;
  if (PMPI_Add_error_string(code, probe) != MPI_SUCCESS ||
      PMPI_Error_string(code, back, &length) != MPI_SUCCESS || std::strcmp(back, probe) != 0) {
    return std::nullopt;
  }
  return code;
}

}  // namespace

int raise_error(MPI_Comm comm, int error_class, const char* message) noexcept {
  // One added error code per class, its string replaced by the latest message
  // (MPI_Add_error_string allows that), so repeated errors do not grow MPI's
  // table. Where MPI cannot keep the string, the code is the class itself and
  // the message goes to stderr, so it is never lost.
  static std::mutex mutex;
  static std::map<int, std::optional<int>> codes;
  int code = error_class;
  {
    std::lock_guard lock(mutex);
    std::optional<int> added;
    try {
      auto it = codes.find(error_class);
      if (it == codes.end()) it = codes.emplace(error_class, added_code(error_class)).first;
      added = it->second;
    } catch (...) {  // no memory for the table: the class itself, the message to stderr
    }
    if (added) {
      code = *added;
      char text[MPI_MAX_ERROR_STRING];
      std::snprintf(text, sizeof text, "%s", message);
      PMPI_Add_error_string(code, text);
    } else {
      std::fprintf(stderr, "%s\n", message);
    }
  }
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

}  // namespace concord::mpi_interposer

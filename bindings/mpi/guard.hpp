// Marks the thread as running concord on the interposer's behalf: concord's own
// MPI_Allreduce calls (set-up agreements on its duplicate communicators) then go
// straight to PMPI_Allreduce instead of coming back into the interposer.
#pragma once

// Thread-locals read on every MPI_Allreduce: the initial-exec model makes each
// access one %fs-relative load instead of a __tls_get_addr call (the library is
// loaded at start-up, by LD_PRELOAD or as a link dependency; a dlopen'ed copy
// uses glibc's static TLS surplus, which these few bytes fit).
#define CONCORD_MPI_HOT_TLS __attribute__((tls_model("initial-exec")))

namespace concord::mpi_interposer {

class InsideConcord {
 public:
  InsideConcord() noexcept : outer_(active_) { active_ = true; }
  ~InsideConcord() { active_ = outer_; }
  InsideConcord(const InsideConcord&) = delete;
  InsideConcord& operator=(const InsideConcord&) = delete;
  static bool active() noexcept { return active_; }

 private:
  bool outer_;
  static thread_local bool active_ CONCORD_MPI_HOT_TLS;
};

}  // namespace concord::mpi_interposer

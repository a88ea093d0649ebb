// Marks the thread as running concord on the interposer's behalf: concord's own
// MPI_Allreduce calls (set-up agreements on its duplicate communicators) then go
// straight to PMPI_Allreduce instead of coming back into the interposer.
#pragma once

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
  static thread_local bool active_;
};

}  // namespace concord::mpi_interposer

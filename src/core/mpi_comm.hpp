// RAII owner of an MPI communicator.
#pragma once

#include <mpi.h>

#include <utility>

namespace concord::detail {

// Frees the communicator on destruction, unless MPI is already finalized (then
// freeing is not allowed and the process is ending anyway).
class MpiComm {
 public:
  MpiComm() = default;
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {}
  MpiComm(MpiComm&& other) noexcept : comm_(std::exchange(other.comm_, MPI_COMM_NULL)) {}
  MpiComm& operator=(MpiComm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = std::exchange(other.comm_, MPI_COMM_NULL);
    }
    return *this;
  }
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  ~MpiComm() { reset(); }

  MPI_Comm get() const { return comm_; }

  // Lets go of the communicator without freeing it (it then lives until
  // MPI_Finalize): for one with messages still in flight that nobody will
  // receive, whose context MPI would otherwise give to a later communicator,
  // whose receives would then match them.
  void release() noexcept { comm_ = MPI_COMM_NULL; }

  void reset() noexcept {
    if (comm_ == MPI_COMM_NULL) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
    comm_ = MPI_COMM_NULL;
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace concord::detail

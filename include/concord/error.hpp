// The one exception type of the library.
#pragma once

#include <stdexcept>
#include <string>

namespace concord {

enum class ErrorCode {
  InvalidArgument = 1,  // a bad pointer, count, dtype/op pair or option value
  Mismatch = 2,         // ranks disagree on the arguments of one collective
  MpiError = 3,         // an MPI call failed; the message carries MPI's error string
  Finalized = 4,        // called after MPI_Finalize
  Internal = 5,         // a broken invariant inside concord: please report it
  SystemError = 6,      // an operating-system call failed (e.g. shared memory); names the call
  Shutdown = 7,         // the engine shut down (or was aborted) before the operation
                        // completed, or this rank aborted the communicator
                        // (Communicator::abort)
  Timeout = 8,          // a peer did not submit a tensor (CONCORD_STALL_TIMEOUT_S), or send
                        // a message or answer the engine's negotiation
                        // (CONCORD_TRANSPORT_TIMEOUT_S) in time
};

std::string_view to_string(ErrorCode code) noexcept;

// what() reads "concord: rank R: <context>: <cause>" so a log line from any
// rank says where it came from. rank() is -1 when it is not known.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, int rank, const std::string& message);
  ErrorCode code() const noexcept { return code_; }
  int rank() const noexcept { return rank_; }

 private:
  ErrorCode code_;
  int rank_;
};

}  // namespace concord

// Communicator::abort()'s flag: raised from any thread, read by every wait of
// that communicator's calls (MPI polls, shared-memory spins), which then give up
// instead of waiting for peers that may never come.
#pragma once

#include <atomic>

namespace concord::detail {

class AbortSignal {
 public:
  // For good: a communicator once aborted stays so.
  void raise() noexcept { raised_.store(true, std::memory_order_release); }
  bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> raised_{false};
};

}  // namespace concord::detail

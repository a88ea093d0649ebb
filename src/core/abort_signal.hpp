// Communicator::abort()'s flag: raised from any thread, read by every wait of
// that communicator's calls (MPI polls, shared-memory spins), which then give up
// instead of waiting for peers that may never come.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace concord::detail {

class AbortSignal {
 public:
  // For good: a communicator once aborted stays so.
  void raise() noexcept {
    raised_.store(true);
    if (std::uint32_t* word = mirror_.load()) set(word);
  }
  bool raised() const noexcept { return raised_.load(std::memory_order_acquire); }

  // A word that raise() also sets to 1, for waits that cannot read this flag: the
  // device-synchronised kernels poll one in mapped pinned memory. `owner` keeps the
  // word alive as long as this signal. A signal already raised sets it now. Once
  // only: a later call is ignored (the first word may still be written).
  // Sequentially consistent on both sides: a raise() racing with this either sees
  // the word or is seen here.
  void mirror_into(std::uint32_t* word, std::shared_ptr<const void> owner) noexcept {
    if (mirror_.load() != nullptr) return;
    mirror_owner_ = std::move(owner);
    mirror_.store(word);
    if (raised_.load()) set(word);
  }

 private:
  static void set(std::uint32_t* word) noexcept { std::atomic_ref<std::uint32_t>(*word).store(1); }

  std::atomic<bool> raised_{false};
  std::atomic<std::uint32_t*> mirror_{nullptr};
  std::shared_ptr<const void> mirror_owner_;
};

}  // namespace concord::detail

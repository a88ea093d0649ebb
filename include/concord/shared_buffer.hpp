// Buffers that the ranks of a node read in place: allreduce on them skips the
// copies through the kernel (cross-memory attach) or the shared segment that a
// buffer of ordinary memory needs for its peers to see it.
#pragma once

#include <concord/communicator.hpp>

#include <cstddef>
#include <memory>

namespace concord {

namespace detail {
class SharedArena;
}

// Memory from this rank's part of its node's shared heap (CONCORD_SHM_HEAP_BYTES),
// or ordinary memory where the node has none (a single rank on the node,
// CONCORD_SHM=0 or no shared segment); either way the same collectives accept
// it. Move-only; the memory goes back when it is destroyed, and keeps the node's
// shared segment mapped until then, even past the communicator. 4096-byte
// aligned; contents are unspecified when allocated.
class SharedBuffer {
 public:
  SharedBuffer() = default;
  ~SharedBuffer();
  SharedBuffer(SharedBuffer&& other) noexcept;
  SharedBuffer& operator=(SharedBuffer&& other) noexcept;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Whether it lies in the shared heap, where the node's other ranks use it in
  // place (on the single-copy path: docs/API.md, "Shared buffers").
  bool shared() const { return arena_ != nullptr; }

 private:
  friend SharedBuffer allocate_shared(std::size_t bytes, const Communicator& comm);
  void reset() noexcept;

  std::shared_ptr<detail::SharedArena> arena_;  // null: ordinary memory
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

// `bytes` of memory for collectives on `comm` (a buffer from another
// communicator's heap is only ordinary memory to this one's peers). Call it on
// every rank of `comm`, like a collective: the first call may set up the node's
// shared segment. Each rank may ask for a different size; 0 gives an empty
// buffer. Throws Error(InvalidArgument) where the heap has no free range that
// large (the message says what is free) and Error(SystemError) where /dev/shm
// (or, without a heap, the process) cannot hold it.
SharedBuffer allocate_shared(std::size_t bytes, const Communicator& comm);

}  // namespace concord

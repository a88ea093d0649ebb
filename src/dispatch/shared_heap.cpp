// Buffers from the node's shared heap (transport/shm_arena.cpp), or ordinary
// memory where there is none.
#include <concord/error.hpp>
#include <concord/shared_buffer.hpp>

#include "collectives/shared/node_arena.hpp"
#include "core/mpi_check.hpp"
#include "dispatch/call_agreement.hpp"

#include <fmt/format.h>

#include <new>
#include <utility>

namespace concord {
namespace {

constexpr std::align_val_t kAlignment{4096};

}  // namespace

SharedBuffer allocate_shared(std::size_t bytes, const Communicator& comm) {
  detail::ensure_not_finalized("concord::allocate_shared");
  // Every rank makes this call, whatever its size: it is where the arena is made.
  // A rank that never comes to it fails the communicator, as in a call.
  detail::SharedArena* arena = nullptr;
  detail::failing_when_abandoned(comm, [&] { arena = detail::node_arena(comm.state()); });
  SharedBuffer buffer;
  if (bytes == 0) return buffer;
  if (arena != nullptr) {
    std::byte* p = arena->heap_allocate(bytes);
    if (p != nullptr) {
      buffer.arena_ = comm.state().arena;
      buffer.data_ = p;
      buffer.size_ = bytes;
      return buffer;
    }
  }
  try {
    buffer.data_ = ::operator new(bytes, kAlignment);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::SystemError, comm.rank(),
                fmt::format("allocate_shared: {} bytes of ordinary memory (this node has no shared "
                            "heap) could not be allocated",
                            bytes));
  }
  buffer.size_ = bytes;
  return buffer;
}

SharedBuffer::~SharedBuffer() {
  reset();
}

SharedBuffer::SharedBuffer(SharedBuffer&& other) noexcept
    : arena_(std::move(other.arena_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedBuffer& SharedBuffer::operator=(SharedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    arena_ = std::move(other.arena_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void SharedBuffer::reset() noexcept {
  if (data_ != nullptr) {
    if (arena_ != nullptr) {
      // Always ours: only allocate_shared sets data_ from the heap.
      arena_->heap_free(data_);
    } else {
      ::operator delete(data_, kAlignment);
    }
  }
  arena_.reset();
  data_ = nullptr;
  size_ = 0;
}

}  // namespace concord

#include "reduce/scratch.hpp"

#include <memory>
#include <new>

namespace concord::detail {
namespace {
struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
}  // namespace

std::byte* scratch(std::size_t bytes) {
  thread_local std::unique_ptr<std::byte[], AlignedDelete> buffer;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset();
    capacity = 0;
    buffer.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{64})));
    capacity = bytes;
  }
  return buffer.get();
}

}  // namespace concord::detail

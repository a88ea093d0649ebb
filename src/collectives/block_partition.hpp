// Even split of `count` elements into `parts` contiguous blocks.
#pragma once

#include <algorithm>
#include <cstddef>

namespace concord::detail {

// Blocks are whole multiples of `quantum` elements, the first (count / quantum) %
// parts blocks one quantum more, and the last block also takes the count % quantum
// left over; so every block starts at a multiple of `quantum` (a quantum of 64 /
// element size keeps blocks on their own cache lines and lets the CUDA kernels
// use 16-byte vector loads on every block). quantum 1: sizes differ by at most one.
class BlockPartition {
 public:
  BlockPartition(std::size_t count, std::size_t parts, std::size_t quantum = 1)
      : count_(count),
        parts_(parts),
        quantum_(std::max<std::size_t>(quantum, 1)),
        base_(count / quantum_ / parts),
        extra_(count / quantum_ % parts) {}
  // Where block `block` starts; `count` for block >= parts.
  std::size_t offset(std::size_t block) const {
    if (block >= parts_) return count_;
    return (block * base_ + std::min(block, extra_)) * quantum_;
  }
  std::size_t size(std::size_t block) const {
    return block >= parts_ ? 0 : offset(block + 1) - offset(block);
  }
  // The largest block's size.
  std::size_t largest() const { return std::max(size(0), size(parts_ - 1)); }
  // Elements in blocks [first, last).
  std::size_t span(std::size_t first, std::size_t last) const {
    return offset(last) - offset(first);
  }

 private:
  std::size_t count_;
  std::size_t parts_;
  std::size_t quantum_;
  std::size_t base_;
  std::size_t extra_;
};

// Elements per 64 bytes (at least one): the quantum of node-level partitions.
inline std::size_t line_quantum(std::size_t elem_size) {
  return std::max<std::size_t>(1, 64 / std::max<std::size_t>(elem_size, 1));
}

}  // namespace concord::detail

// Even split of `count` elements into `parts` contiguous blocks.
#pragma once

#include <algorithm>
#include <cstddef>

namespace concord::detail {

// The first count % parts blocks get one element more, so sizes differ by at most one.
class BlockPartition {
 public:
  BlockPartition(std::size_t count, std::size_t parts)
      : base_(count / parts), extra_(count % parts) {}
  std::size_t offset(std::size_t block) const { return block * base_ + std::min(block, extra_); }
  std::size_t size(std::size_t block) const { return base_ + (block < extra_ ? 1 : 0); }
  // Elements in blocks [first, last).
  std::size_t span(std::size_t first, std::size_t last) const {
    return offset(last) - offset(first);
  }

 private:
  std::size_t base_;
  std::size_t extra_;
};

}  // namespace concord::detail

// Per-thread scratch memory for algorithms, kept between calls so a training loop
// does not pay for allocation and first-touch page faults every step.
#pragma once

#include <cstddef>

namespace concord::detail {

// At least `bytes` bytes, 64-byte aligned, valid until the next call on this thread.
std::byte* scratch(std::size_t bytes);

}  // namespace concord::detail

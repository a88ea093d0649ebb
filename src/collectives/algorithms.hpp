// The allreduce algorithms. Each works in place on `buf`, which holds this rank's
// contribution on entry and the reduction over every rank of the transport on
// return, bitwise identical everywhere. They speak only the Transport verbs.
#pragma once

#include "reduce/reduce_kernels.hpp"
#include "transport/transport.hpp"

#include <concord/types.hpp>

#include <cstddef>

namespace concord::detail {

struct ReduceSpec {
  std::size_t elem_size;  // bytes per element
  ReduceFn fn;            // dst = a op b, commutative to the bit
};

void allreduce_ring(Transport& t, void* buf, std::size_t count, const ReduceSpec& spec,
                    std::size_t segment_bytes);
void allreduce_recursive_doubling(Transport& t, void* buf, std::size_t count,
                                  const ReduceSpec& spec);
void allreduce_rabenseifner(Transport& t, void* buf, std::size_t count, const ReduceSpec& spec);

// Message tags, one per algorithm so a stray message can never be mistaken for
// another algorithm's.
enum Tag : int {
  kTagRing = 101,
  kTagRecursiveDoubling = 102,
  kTagRabenseifner = 103,
};

}  // namespace concord::detail

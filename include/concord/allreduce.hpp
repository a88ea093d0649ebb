// The blocking allreduce.
#pragma once

#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <cstddef>

namespace concord {

struct AllreduceOptions {
  // Auto picks by message size, rank count and topology from the tuning table
  // (docs/ALGORITHMS.md). CONCORD_ALLREDUCE_ALGORITHM overrides Auto, never an
  // explicit choice made here.
  Algorithm algorithm = Algorithm::Auto;
  // Pipeline segment of the ring algorithm in bytes; 0 takes
  // CONCORD_RING_SEGMENT_BYTES or the built-in default.
  std::size_t ring_segment_bytes = 0;
};

// recv[i] = op over ranks of send[i], for i < count, on every rank of `comm`.
// send == recv means in place. Results are bitwise identical on every rank.
// Collective: every rank must call it with the same count, dtype and op
// (CONCORD_CHECK_ARGS=1 verifies that and names the rank that differs).
// Throws concord::Error on bad arguments or MPI failure.
void allreduce(const void* send, void* recv, std::size_t count, DataType dtype, ReduceOp op,
               const Communicator& comm, const AllreduceOptions& options = {});

}  // namespace concord

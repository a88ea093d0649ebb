// In-place allreduce of several buffers as one message, for the engine's fusion
// buckets: where the shared-memory path applies, the tensors are reduced where
// they lie (no packing) and each result is scaled on its way out.
#pragma once

#include "collectives/message_view.hpp"

#include <concord/allreduce.hpp>

#include <vector>

namespace concord::detail {

// Whether allreduce_segments() can run on `comm` with `algorithm` (the same
// answer on every rank). Collective the first time on a communicator (it may
// set up the shared-memory segment).
bool segments_supported(const Communicator& comm, Algorithm algorithm);

// Precondition: segments_supported(comm, algorithm); dtype/op supported.
void allreduce_segments(std::vector<Segment> segments, DataType dtype, ReduceOp op,
                        const Communicator& comm);

}  // namespace concord::detail

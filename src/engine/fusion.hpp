// Fusion buckets: consecutive ready allreduces of one dtype and (effective) op,
// packed into one buffer up to the fusion threshold and reduced by one call.
#pragma once

#include "engine/work.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace concord::detail {

struct Bucket {
  std::vector<std::shared_ptr<Work>> works;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;  // Avg is reduced as Sum and scaled on unpack
  Device device = Device::Cpu;  // host and device tensors never share a bucket
  std::size_t count = 0;        // elements in all
};

// The largest bucket where neither the options nor CONCORD_FUSION_THRESHOLD set
// one. Within one node a bucket is reduced in place through shared memory, so
// a large one costs nothing and saves calls: 64 MiB. Across nodes each bucket
// is packed, sent and unpacked: smaller buckets let packing, the network and
// unpacking overlap, and messages of a few MiB stream faster over TCP than
// larger ones (bench/RESULTS.md, "Fusion across 2 hosts"): 4 MiB.
std::size_t default_fusion_threshold(int num_nodes);

// Avg reduces as Sum; the division goes into the postscale.
ReduceOp effective_op(ReduceOp op);

// Splits `ready` (allreduces only, in the global order) into buckets. A bucket
// closes when the next tensor has another dtype, op or device, or would pass
// `threshold` bytes; a tensor larger than the threshold gets a bucket of its own.
// threshold == 0: one bucket per tensor.
std::vector<Bucket> plan_buckets(const std::vector<std::shared_ptr<Work>>& ready,
                                 std::size_t threshold);

// The factor applied after the reduction: postscale, divided by `ranks` for Avg.
double output_scale(const Signature& sig, int ranks);

// Bucket <-> buffer, applying each tensor's prescale on the way in and its
// output_scale on the way out.
void pack(const Bucket& bucket, std::byte* buffer);
void unpack(const Bucket& bucket, std::byte* buffer, int ranks);

}  // namespace concord::detail

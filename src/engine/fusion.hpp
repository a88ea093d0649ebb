// Fusion buckets: consecutive ready allreduces of one dtype and (effective) op,
// packed into one buffer up to the fusion threshold and reduced by one call.
#pragma once

#include "engine/work.hpp"

#include <cstddef>
#include <cstdint>
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
// larger ones (RESULTS.md at commit 5aa2ccf, "Fusion across 2 hosts"): 4 MiB.
std::size_t default_fusion_threshold(int num_nodes);

// Avg reduces as Sum; the division goes into the postscale.
ReduceOp effective_op(ReduceOp op);

// Where buckets are packed (across nodes, flat algorithms), each byte of a
// fused tensor is copied into the buffer and out again. Alone, a tensor costs
// one more collective's fixed latency instead: a few µs on InfiniBand, tens of
// µs over TCP, against 50-100 µs for copying 256 KiB twice (ResNet-50
// across 2 hosts, unlimited link: the fused step 1.01-1.10x one flat allreduce
// of the same bytes with every tensor packed, 0.88-1.04x with these alone;
// RESULTS.md at commit 5aa2ccf, "Fusion: large tensors alone"). A host tensor of at least
// this many bytes is reduced alone, where it lies, unless the options or
// CONCORD_FUSION_IN_PLACE_BYTES say otherwise.
inline constexpr std::size_t kDefaultFusionInPlaceBytes = std::size_t{256} << 10;

// Splits `ready` (allreduces only, in the global order) into buckets. A bucket
// closes when the next tensor has another dtype, op or device, or would pass
// `threshold` bytes; a tensor larger than the threshold gets a bucket of its own.
// threshold == 0: one bucket per tensor. A host tensor of `in_place_bytes` or more
// also gets a bucket of its own, and the bucket being filled stays open past it,
// so small tensors on either side of a large one still share a bucket (which
// then runs before the large one; the order is the same on every rank).
std::vector<Bucket> plan_buckets(const std::vector<std::shared_ptr<Work>>& ready,
                                 std::size_t threshold, std::size_t in_place_bytes = SIZE_MAX);

// The factor applied after the reduction: postscale, divided by `ranks` for Avg.
double output_scale(const Signature& sig, int ranks);

// Bucket <-> buffer, applying each tensor's prescale on the way in and its
// output_scale on the way out.
void pack(const Bucket& bucket, std::byte* buffer);
void unpack(const Bucket& bucket, std::byte* buffer, int ranks);

}  // namespace concord::detail

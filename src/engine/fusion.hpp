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
// one: the tuning table's fusion_bytes_one_node or fusion_bytes_across_nodes
// (collectives/tuning_table.hpp says why they are what they are).
std::size_t default_fusion_threshold(int num_nodes);

// Avg reduces as Sum; the division goes into the postscale.
ReduceOp effective_op(ReduceOp op);

// Where buckets are packed, the size from which a host tensor is reduced alone
// where neither the options nor CONCORD_FUSION_IN_PLACE_BYTES set one: the tuning
// table's fusion_in_place_bytes.
std::size_t default_fusion_in_place_bytes();

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

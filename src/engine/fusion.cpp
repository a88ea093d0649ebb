#include "engine/fusion.hpp"

#include "collectives/tuning_table.hpp"
#include "reduce/reduce_kernels.hpp"

#include <cstring>
#include <optional>

namespace concord::detail {

std::size_t default_fusion_threshold(int num_nodes) {
  const SizeThresholds& t = active_tuning_table().thresholds();
  return num_nodes > 1 ? t.fusion_bytes_across_nodes : t.fusion_bytes_one_node;
}

std::size_t default_fusion_in_place_bytes() {
  return active_tuning_table().thresholds().fusion_in_place_bytes;
}

ReduceOp effective_op(ReduceOp op) {
  return op == ReduceOp::Avg ? ReduceOp::Sum : op;
}

double output_scale(const Signature& sig, int ranks) {
  return sig.op == ReduceOp::Avg ? sig.postscale / ranks : sig.postscale;
}

std::vector<Bucket> plan_buckets(const std::vector<std::shared_ptr<Work>>& ready,
                                 std::size_t threshold, std::size_t in_place_bytes) {
  std::vector<Bucket> buckets;
  std::optional<std::size_t> open;  // the bucket small tensors fill
  std::size_t bytes = 0;            // in buckets[*open]
  for (const auto& w : ready) {
    const std::size_t wbytes = w->tensor.count * size_of(w->sig.dtype);
    const ReduceOp op = effective_op(w->sig.op);
    const Bucket own{{w}, w->sig.dtype, op, w->sig.device, w->tensor.count};
    if (w->sig.device == Device::Cpu && wbytes >= in_place_bytes) {
      buckets.push_back(own);
      continue;
    }
    const bool fits = open && threshold != 0 && buckets[*open].dtype == w->sig.dtype &&
                      buckets[*open].op == op && buckets[*open].device == w->sig.device &&
                      bytes <= threshold && wbytes <= threshold - bytes;  // cannot overflow
    if (fits) {
      buckets[*open].works.push_back(w);
      buckets[*open].count += w->tensor.count;
      bytes += wbytes;
    } else {
      open = buckets.size();
      buckets.push_back(own);
      bytes = wbytes;
    }
  }
  return buckets;
}

void pack(const Bucket& bucket, std::byte* buffer) {
  const std::size_t esize = size_of(bucket.dtype);
  for (const auto& w : bucket.works) {
    const std::size_t bytes = w->tensor.count * esize;
    if (bytes != 0) std::memcpy(buffer, w->tensor.data, bytes);
    if (w->sig.prescale != 1.0) scale(buffer, w->tensor.count, bucket.dtype, w->sig.prescale);
    buffer += bytes;
  }
}

void unpack(const Bucket& bucket, std::byte* buffer, int ranks) {
  const std::size_t esize = size_of(bucket.dtype);
  for (const auto& w : bucket.works) {
    const std::size_t bytes = w->tensor.count * esize;
    const double factor = output_scale(w->sig, ranks);
    if (factor != 1.0) scale(buffer, w->tensor.count, bucket.dtype, factor);
    if (bytes != 0) std::memcpy(w->tensor.data, buffer, bytes);
    buffer += bytes;
  }
}

}  // namespace concord::detail

// The engine's bucket plan: which tensors share a bucket, and in what order the
// buckets run. Each case spells out the partition it expects.
#include <catch2/catch.hpp>

#include "engine/fusion.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using concord::DataType;
using concord::Device;
using concord::ReduceOp;
using concord::detail::Bucket;
using concord::detail::plan_buckets;
using concord::detail::Work;

namespace {

constexpr std::size_t KiB = 1024;

std::shared_ptr<Work> tensor(const std::string& name, std::size_t bytes,
                             DataType dtype = DataType::Float32, Device device = Device::Cpu) {
  auto w = std::make_shared<Work>();
  w->name = name;
  w->sig.dtype = dtype;
  w->sig.device = device;
  w->sig.count = bytes / concord::size_of(dtype);
  w->tensor.count = w->sig.count;
  return w;
}

// Each bucket as its tensors' names, in run order.
std::vector<std::vector<std::string>> names(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : buckets) {
    std::vector<std::string> bucket;
    std::size_t count = 0;
    for (const auto& w : b.works) {
      bucket.push_back(w->name);
      count += w->tensor.count;
    }
    CHECK(b.count == count);  // the bucket's element count is its tensors'
    out.push_back(bucket);
  }
  return out;
}

using Plan = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("without a size for lone tensors, consecutive tensors fill buckets up to the threshold",
          "[fusion]") {
  const std::vector<std::shared_ptr<Work>> ready{tensor("a", 1 * KiB),    tensor("b", 1024 * KiB),
                                                 tensor("c", 2 * KiB),    tensor("d", 3072 * KiB),
                                                 tensor("e", 5000 * KiB), tensor("f", 4 * KiB)};
  // a+b+c fit 4 MiB; d would pass it; e is larger than the threshold.
  CHECK(names(plan_buckets(ready, 4096 * KiB)) == Plan{{"a", "b", "c"}, {"d"}, {"e"}, {"f"}});
  CHECK(names(plan_buckets(ready, 0)) == Plan{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}});
}

TEST_CASE("large host tensors go alone and small ones share a bucket around them", "[fusion]") {
  const std::vector<std::shared_ptr<Work>> ready{tensor("a", 1 * KiB),   tensor("big1", 1024 * KiB),
                                                 tensor("b", 2 * KiB),   tensor("big2", 256 * KiB),
                                                 tensor("c", 255 * KiB), tensor("d", 4 * KiB)};
  CHECK(names(plan_buckets(ready, 4096 * KiB, 256 * KiB)) ==
        Plan{{"a", "b", "c", "d"}, {"big1"}, {"big2"}});
}

TEST_CASE("the open bucket closes at the threshold, and later small tensors open the next",
          "[fusion]") {
  const std::vector<std::shared_ptr<Work>> ready{tensor("a", 200 * KiB), tensor("big", 300 * KiB),
                                                 tensor("b", 200 * KiB), tensor("c", 200 * KiB),
                                                 tensor("d", 100 * KiB)};
  // Threshold 500 KiB: a+b fit (400), c would pass it and opens a bucket with d.
  CHECK(names(plan_buckets(ready, 500 * KiB, 256 * KiB)) == Plan{{"a", "b"}, {"big"}, {"c", "d"}});
}

TEST_CASE("a change of dtype or op closes the open bucket", "[fusion]") {
  auto mx = tensor("max", 1 * KiB);
  mx->sig.op = ReduceOp::Max;
  auto avg = tensor("avg", 1 * KiB);
  avg->sig.op = ReduceOp::Avg;  // reduced as Sum, so it joins a Sum bucket
  const std::vector<std::shared_ptr<Work>> ready{
      tensor("a", 1 * KiB), avg, tensor("big", 512 * KiB), tensor("h", 2 * KiB, DataType::Float16),
      tensor("b", 1 * KiB), mx};
  CHECK(names(plan_buckets(ready, 4096 * KiB, 256 * KiB)) ==
        Plan{{"a", "avg"}, {"big"}, {"h"}, {"b"}, {"max"}});
}

TEST_CASE("device tensors are never put alone by size", "[fusion]") {
  const std::vector<std::shared_ptr<Work>> ready{
      tensor("g1", 1 * KiB, DataType::Float32, Device::Cuda),
      tensor("g2", 1024 * KiB, DataType::Float32, Device::Cuda), tensor("h", 1 * KiB),
      tensor("g3", 1 * KiB, DataType::Float32, Device::Cuda)};
  // Host and device never share a bucket; the device bucket closes at the host tensor.
  CHECK(names(plan_buckets(ready, 4096 * KiB, 256 * KiB)) == Plan{{"g1", "g2"}, {"h"}, {"g3"}});
}

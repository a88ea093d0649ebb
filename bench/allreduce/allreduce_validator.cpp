#include "allreduce/allreduce_validator.hpp"

#include "common/elements.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace concord::bench {
namespace {

// Validation inputs: small integers whose reduction is exact in every dtype.
double pattern(int rank, std::size_t i, DataType dtype, ReduceOp op) {
  const auto k = static_cast<int>(i % 1009);
  switch (op) {
    case ReduceOp::Prod:
      return dtype == DataType::UInt8 ? 1.0 : ((rank + k) % 2 == 0 ? 1.0 : -1.0);
    case ReduceOp::Min:
    case ReduceOp::Max:
      return dtype == DataType::UInt8 ? (rank * 3 + k) % 11 : (rank * 3 + k) % 11 - 5;
    default:
      return dtype == DataType::UInt8 ? (rank + k) % 5 : (rank + k) % 5 - 2;
  }
}

}  // namespace

Validator::Validator(const AllreduceOptions& o, int rank, int ranks, std::size_t max_count)
    : o_(o), esize_(size_of(o.dtype)), input_(max_count * esize_), expected_(max_count * esize_) {
  for (std::size_t i = 0; i < max_count; ++i) {
    store_element(&input_[i * esize_], o.dtype, pattern(rank, i, o.dtype, o.op));
    double acc = pattern(0, i, o.dtype, o.op);
    for (int r = 1; r < ranks; ++r) {
      const double v = pattern(r, i, o.dtype, o.op);
      switch (o.op) {
        case ReduceOp::Prod:
          acc *= v;
          break;
        case ReduceOp::Min:
          acc = std::min(acc, v);
          break;
        case ReduceOp::Max:
          acc = std::max(acc, v);
          break;
        default:
          acc += v;
      }
    }
    if (o.op == ReduceOp::Avg) acc /= ranks;
    expected_avg_.push_back(acc);
    store_element(&expected_[i * esize_], o.dtype, acc);
  }
}

void Validator::fill(std::byte* send, std::size_t count) const {
  std::memcpy(send, input_.data(), count * esize_);
}

bool Validator::check(const std::byte* recv, std::size_t count) const {
  if (o_.op != ReduceOp::Avg) return std::memcmp(recv, expected_.data(), count * esize_) == 0;
  // The average need not be representable: allow the dtype's rounding.
  const double eps = o_.dtype == DataType::Float16    ? 1e-3
                     : o_.dtype == DataType::BFloat16 ? 8e-3
                     : o_.dtype == DataType::Float32  ? 1e-6
                                                      : 1e-14;
  for (std::size_t i = 0; i < count; ++i) {
    const double got = load_element(recv + i * esize_, o_.dtype);
    if (!(std::fabs(got - expected_avg_[i]) <= eps * std::max(1.0, std::fabs(expected_avg_[i]))))
      return false;
  }
  return true;
}

}  // namespace concord::bench

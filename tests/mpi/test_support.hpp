// Test helpers: inputs every rank can derive for any rank, and a reference
// reduction computed here, independently of the library's kernels.
#pragma once

#include <concord/types.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace concord::test {

// Value of element i on rank r, chosen so the exact result is representable in
// every dtype (small integers, powers of two), so any reduction order gives the
// same answer and results can be compared exactly.
inline double input_value(int r, std::size_t i, DataType dtype, ReduceOp op) {
  const auto k = static_cast<std::int64_t>(i % 1000003);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      if (dtype == DataType::UInt8) return static_cast<double>((r * 7 + k * 13) % 17);
      return static_cast<double>((r * 7 + k * 13) % 17 - 8);
    case ReduceOp::Prod: {
      static constexpr double kFloatFactors[] = {1.0, -1.0, 2.0, 0.5, -2.0};
      static constexpr double kIntFactors[] = {1.0, -1.0, 2.0, 3.0, -1.0};
      const std::size_t pick = static_cast<std::size_t>((r * 3 + k * 5) % 5);
      if (dtype == DataType::UInt8) return static_cast<double>(1 + (r + k) % 3);
      return is_floating_point(dtype) ? kFloatFactors[pick] : kIntFactors[pick];
    }
    case ReduceOp::Min:
    case ReduceOp::Max: {
      const double v = static_cast<double>((r * 31 + k * 17) % 201);
      if (dtype == DataType::UInt8) return v;
      return is_floating_point(dtype) ? (v - 100.0) / 4.0 : v - 100.0;
    }
  }
  return 0.0;
}

// Stores `value` (exactly representable) as dtype at dst.
inline void store(void* dst, DataType dtype, double value) {
  switch (dtype) {
    case DataType::Int8: {
      auto v = static_cast<std::int8_t>(static_cast<std::int64_t>(value));
      std::memcpy(dst, &v, 1);
      break;
    }
    case DataType::UInt8: {
      auto v = static_cast<std::uint8_t>(static_cast<std::int64_t>(value));
      std::memcpy(dst, &v, 1);
      break;
    }
    case DataType::Int32: {
      auto v = static_cast<std::int32_t>(value);
      std::memcpy(dst, &v, 4);
      break;
    }
    case DataType::Int64: {
      auto v = static_cast<std::int64_t>(value);
      std::memcpy(dst, &v, 8);
      break;
    }
    case DataType::Float16: {
      auto v = static_cast<_Float16>(value);
      std::memcpy(dst, &v, 2);
      break;
    }
    case DataType::BFloat16: {
      // Exact values only: bfloat16 is the top half of the float.
      auto bits =
          static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(value)) >> 16);
      std::memcpy(dst, &bits, 2);
      break;
    }
    case DataType::Float32: {
      auto v = static_cast<float>(value);
      std::memcpy(dst, &v, 4);
      break;
    }
    case DataType::Float64:
      std::memcpy(dst, &value, 8);
      break;
  }
}

inline double load(const void* src, DataType dtype) {
  switch (dtype) {
    case DataType::Int8: {
      std::int8_t v;
      std::memcpy(&v, src, 1);
      return v;
    }
    case DataType::UInt8: {
      std::uint8_t v;
      std::memcpy(&v, src, 1);
      return v;
    }
    case DataType::Int32: {
      std::int32_t v;
      std::memcpy(&v, src, 4);
      return v;
    }
    case DataType::Int64: {
      std::int64_t v;
      std::memcpy(&v, src, 8);
      return static_cast<double>(v);
    }
    case DataType::Float16: {
      _Float16 v;
      std::memcpy(&v, src, 2);
      return static_cast<double>(v);
    }
    case DataType::BFloat16: {
      std::uint16_t bits;
      std::memcpy(&bits, src, 2);
      return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
    }
    case DataType::Float32: {
      float v;
      std::memcpy(&v, src, 4);
      return v;
    }
    case DataType::Float64: {
      double v;
      std::memcpy(&v, src, 8);
      return v;
    }
  }
  return 0.0;
}

// Integer results wrap like two's complement of the dtype's width.
inline double wrap_integer(double exact, DataType dtype) {
  const auto v = static_cast<std::int64_t>(exact);
  switch (dtype) {
    case DataType::Int8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DataType::UInt8:
      return static_cast<std::uint8_t>(v);
    case DataType::Int32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    default:
      return exact;
  }
}

// The expected result of element i: a serial reduction over every rank's input.
inline double reference_value(int ranks, std::size_t i, DataType dtype, ReduceOp op) {
  double acc = input_value(0, i, dtype, op);
  for (int r = 1; r < ranks; ++r) {
    const double v = input_value(r, i, dtype, op);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += v;
        break;
      case ReduceOp::Prod:
        acc *= v;
        break;
      case ReduceOp::Min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::Max:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::Avg) return acc / ranks;
  return is_floating_point(dtype) ? acc : wrap_integer(acc, dtype);
}

// Rounding allowed for Avg, whose exact result need not be representable.
inline double avg_tolerance(DataType dtype, double expected) {
  const double magnitude = std::max(1.0, std::fabs(expected));
  switch (dtype) {
    case DataType::Float16:
      return magnitude * std::ldexp(1.0, -10);
    case DataType::BFloat16:
      return magnitude * std::ldexp(1.0, -7);
    case DataType::Float32:
      return magnitude * std::ldexp(1.0, -22);
    default:
      return magnitude * std::ldexp(1.0, -50);
  }
}

// One cell of a correctness matrix: this rank's input and the serial reference
// the result must match (bit for bit, or within rounding for Avg).
struct ReferenceCase {
  ReferenceCase(int rank, int ranks, std::size_t n, DataType type, ReduceOp reduce_op)
      : count(n),
        dtype(type),
        op(reduce_op),
        input(n * size_of(type)),
        expected(n * size_of(type)),
        exact(n) {
    const std::size_t esize = size_of(dtype);
    for (std::size_t i = 0; i < count; ++i) {
      store(&input[i * esize], dtype, input_value(rank, i, dtype, op));
      exact[i] = reference_value(ranks, i, dtype, op);
      if (op != ReduceOp::Avg) store(&expected[i * esize], dtype, exact[i]);
    }
  }

  // Index of the first element of got that differs from the reference, or count.
  std::size_t first_mismatch(const std::vector<std::byte>& got) const {
    const std::size_t esize = size_of(dtype);
    if (count == 0) return 0;
    if (op != ReduceOp::Avg) {
      if (std::memcmp(got.data(), expected.data(), count * esize) == 0) return count;
      for (std::size_t i = 0; i < count; ++i) {
        if (std::memcmp(&got[i * esize], &expected[i * esize], esize) != 0) return i;
      }
      return count;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const double v = load(&got[i * esize], dtype);
      if (!(std::fabs(v - exact[i]) <= avg_tolerance(dtype, exact[i]))) return i;
    }
    return count;
  }

  // Empty when got matches; otherwise names the first wrong element, so that a
  // CHECK(mismatch(got) == "") failure says what went wrong.
  std::string mismatch(const std::vector<std::byte>& got) const {
    if (got.size() < count * size_of(dtype)) return "result has too few bytes";
    const std::size_t bad = first_mismatch(got);
    if (bad == count) return {};
    return "first wrong element " + std::to_string(bad) + " of " + std::to_string(count) +
           ": got " + std::to_string(load(&got[bad * size_of(dtype)], dtype)) + ", expected " +
           std::to_string(exact[bad]);
  }

  std::size_t count;
  DataType dtype;
  ReduceOp op;
  std::vector<std::byte> input;     // this rank's contribution
  std::vector<std::byte> expected;  // the reference's bytes (left zero for Avg)
  std::vector<double> exact;        // the reference's values
};

inline const std::vector<DataType>& all_dtypes() {
  static const std::vector<DataType> v{DataType::Int8,    DataType::UInt8,   DataType::Int32,
                                       DataType::Int64,   DataType::Float16, DataType::BFloat16,
                                       DataType::Float32, DataType::Float64};
  return v;
}
inline const std::vector<ReduceOp>& all_ops() {
  static const std::vector<ReduceOp> v{ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                       ReduceOp::Avg};
  return v;
}
// Whether a matrix runs (dtype, op) at `count`. CONCORD_TEST_LARGE=sampled (the
// sanitizer build's setting, scripts/test) keeps the counts above 65537, which
// take the large-message paths (rounds, segments, single copy) and most of a
// matrix's time, for one op per dtype: the dtype's index in all_dtypes(), modulo
// its supported ops, picks it, so every dtype and every op still meets those
// paths, and every pair does at the smaller counts. Unset, every pair runs at
// every count (the Release build's mpi_np*_matrix_full, a real GPU's run).
inline bool case_wanted(DataType dtype, ReduceOp op, std::size_t count) {
  static const bool sampled = [] {
    const char* v = std::getenv("CONCORD_TEST_LARGE");
    return v != nullptr && std::string_view(v) == "sampled";
  }();
  if (!sampled || count <= 65537) return true;
  std::vector<ReduceOp> supported;
  for (ReduceOp o : all_ops()) {
    if (is_supported(dtype, o)) supported.push_back(o);
  }
  const auto& dtypes = all_dtypes();
  const auto index =
      static_cast<std::size_t>(std::find(dtypes.begin(), dtypes.end(), dtype) - dtypes.begin());
  return op == supported[index % supported.size()];
}

// A whole unsigned decimal number (a test variable's value), or nullopt where
// `text` is anything else; the caller says what the variable must hold.
inline std::optional<std::size_t> parse_size(std::string_view text) {
  std::size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Every algorithm, or those CONCORD_TEST_ALGORITHMS lists (comma-separated), so
// CTest can run one path under several configurations without the whole matrix.
inline const std::vector<Algorithm>& all_algorithms() {
  static const std::vector<Algorithm> v = [] {
    const char* only = std::getenv("CONCORD_TEST_ALGORITHMS");
    if (only == nullptr || *only == '\0') {
      return std::vector<Algorithm>{Algorithm::Auto, Algorithm::Ring, Algorithm::RecursiveDoubling,
                                    Algorithm::ReduceScatterAllgather, Algorithm::Hierarchical};
    }
    std::vector<Algorithm> list;
    std::string_view rest(only);
    while (!rest.empty()) {
      const std::size_t comma = rest.find(',');
      list.push_back(parse_algorithm(rest.substr(0, comma)));
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return list;
  }();
  return v;
}

}  // namespace concord::test

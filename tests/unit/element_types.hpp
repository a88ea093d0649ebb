// Element types by dtype, for tests that compare kernels bit for bit: every dtype
// and op, the C++ type a dtype's elements are held in, their bits, and the NaN rules
// that the device and host kernels are compared under.
#pragma once

#include <concord/types.hpp>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace concord::test {

inline constexpr DataType kAllTypes[] = {DataType::Int8,    DataType::UInt8,   DataType::Int32,
                                         DataType::Int64,   DataType::Float16, DataType::BFloat16,
                                         DataType::Float32, DataType::Float64};
inline constexpr DataType kFloatTypes[] = {DataType::Float16, DataType::BFloat16, DataType::Float32,
                                           DataType::Float64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                       ReduceOp::Avg};

// Calls fn.template operator()<T>() with the element type of `d` (16-bit floats
// as their bits).
template <class Fn>
void with_element_type(DataType d, Fn&& fn) {
  switch (d) {
    case DataType::Int8:
      return fn.template operator()<std::int8_t>();
    case DataType::UInt8:
      return fn.template operator()<std::uint8_t>();
    case DataType::Int32:
      return fn.template operator()<std::int32_t>();
    case DataType::Int64:
      return fn.template operator()<std::int64_t>();
    case DataType::Float16:
    case DataType::BFloat16:
      return fn.template operator()<std::uint16_t>();
    case DataType::Float32:
      return fn.template operator()<float>();
    case DataType::Float64:
      return fn.template operator()<double>();
  }
}

// v's bits as a To of the same size.
template <class To, class From>
To bitcast(From f) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &f, sizeof t);
  return t;
}

// The bits of v, zero-extended.
template <class T>
std::uint64_t bits64(T v) {
  std::uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}

// NaN test and quieting on a value of dtype d (16-bit floats as bits).
template <class T>
bool is_nan_value(DataType d, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    if (d == DataType::Float16) return (v & 0x7fff) > 0x7c00;
    if (d == DataType::BFloat16) return (v & 0x7fff) > 0x7f80;
  }
  return false;
}
template <class T>
T quieted(DataType d, T v) {
  if constexpr (std::is_same_v<T, float>) {
    return bitcast<float>(bitcast<std::uint32_t>(v) | 0x00400000u);
  } else if constexpr (std::is_same_v<T, double>) {
    return bitcast<double>(bitcast<std::uint64_t>(v) | 0x0008000000000000u);
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    return static_cast<T>(v | (d == DataType::Float16 ? 0x0200 : 0x0040));
  } else {
    return v;
  }
}

// Where both operands of a floating-point add or multiply are NaN, the host
// returns one of them made quiet, but which one depends on the code path (the
// compiler orders the operands of a commutative operation as it likes: the host
// tables' vector body and scalar tail disagree). The functors always return x's;
// accept that where the host returned y's, and count it.
template <class T>
bool both_nan_other_choice(DataType d, T x, T y, T want, T got) {
  return is_nan_value(d, x) && is_nan_value(d, y) && bits64(got) == bits64(quieted(d, x)) &&
         bits64(want) == bits64(quieted(d, y));
}

}  // namespace concord::test

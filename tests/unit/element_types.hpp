// Element types by dtype, for tests that compare kernels bit for bit: every dtype
// and op, the C++ type a dtype's elements are held in, and their bits.
#pragma once

#include <concord/types.hpp>

#include <cstdint>
#include <cstring>

namespace concord::test {

inline constexpr DataType kAllTypes[] = {DataType::Int8,    DataType::UInt8,   DataType::Int32,
                                         DataType::Int64,   DataType::Float16, DataType::BFloat16,
                                         DataType::Float32, DataType::Float64};
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

}  // namespace concord::test

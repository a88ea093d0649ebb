// The per-element operations of the CUDA kernels (cuda_kernels.cu,
// cuda_batched_copy.cu), one functor per dtype x op and per floating-point scale,
// written so that this same header compiles with nvcc (host and device) and with a
// plain C++ compiler: tests/unit/test_cuda_element_ops.cpp (reduce) and
// test_cuda_scale_ops.cpp (scale) check every functor bit for bit against the host
// table (reduce_kernels_impl.hpp) on a machine without a GPU. The dispatch from
// (DataType, ReduceOp) to a functor is here too, in one place, so the tests
// exercise the same mapping the kernels use.
//
// The arithmetic they share with the host, and the reasoning that makes it bit-exact
// (NaNs, rounding, the 16-bit formats), is cuda_host_arith.cuh's.
#pragma once

#include "reduce/cuda_host_arith.cuh"

#include <concord/types.hpp>

#include <cstdint>
#include <type_traits>

namespace concord::detail::cuda::ops {

// ---- integers: Sum and Prod wrap (in the unsigned type) ---------------------------

template <class T>
struct IntSum {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  }
};
template <class T>
struct IntProd {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  }
};
template <class T>
struct IntMin {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const { return y < x ? y : x; }
};
template <class T>
struct IntMax {
  using value_type = T;
  CONCORD_HD T operator()(T x, T y) const { return x < y ? y : x; }
};

// ---- float / double -------------------------------------------------------------

template <class F>
struct FloatSum {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const { return host_nan(add_rn(x, y), x, y); }
};
template <class F>
struct FloatProd {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const { return host_nan(mul_rn(x, y), x, y); }
};

// As the host: a NaN input gives that NaN made quiet (x's when both are); otherwise
// the smaller/larger value, with -0 < +0 (equal numbers differ in bits only as
// +0/-0, so x | y for min and x & y for max pick the right zero). Only comparisons
// and bit operations: identical on any hardware.
template <class F, bool kMax>
struct FloatMinMax {
  using value_type = F;
  CONCORD_HD F operator()(F x, F y) const {
    using B = FloatBits<F>;
    using Bits = typename B::Bits;
    const Bits bx = B::to_bits(x);
    const Bits by = B::to_bits(y);
    const bool x_wins = kMax ? (y < x) : (x < y);
    const bool y_wins = kMax ? (x < y) : (y < x);
    Bits r = kMax ? (bx & by) : (bx | by);
    r = x_wins ? bx : r;
    r = y_wins ? by : r;
    r = (y != y) ? (by | B::kQuiet) : r;
    r = (x != x) ? (bx | B::kQuiet) : r;
    return B::from_bits(r);
  }
};

// ---- Float16 / BFloat16 ---------------------------------------------------------

// Sum / Prod: widen both, compute in float, round once. (float has more than 2p + 2
// bits for both formats' precision p, so this is the correctly rounded result.)
template <class Fmt>
struct Sum16 {
  using value_type = std::uint16_t;
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    return finish16<Fmt>(add_rn(Fmt::widen(x), Fmt::widen(y)), x, y);
  }
};
template <class Fmt>
struct Prod16 {
  using value_type = std::uint16_t;
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    return finish16<Fmt>(mul_rn(Fmt::widen(x), Fmt::widen(y)), x, y);
  }
};

// Min / Max on the bits, as the host: key() maps sign-magnitude to a signed integer
// in numeric order with -0 just below +0, one-to-one; NaNs as for float.
template <class Fmt, bool kMax>
struct MinMax16 {
  using value_type = std::uint16_t;
  CONCORD_HD static int key(std::int16_t s) { return s ^ ((s >> 15) & 0x7fff); }
  CONCORD_HD std::uint16_t operator()(std::uint16_t x, std::uint16_t y) const {
    const auto sx = static_cast<std::int16_t>(x);
    const auto sy = static_cast<std::int16_t>(y);
    const int kx = key(sx);
    const int ky = key(sy);
    const bool x_wins = kMax ? (ky < kx) : (kx < ky);
    std::uint16_t r = x_wins ? x : y;
    r = is_nan16<Fmt>(y) ? static_cast<std::uint16_t>(y | Fmt::kQuiet) : r;
    r = is_nan16<Fmt>(x) ? static_cast<std::uint16_t>(x | Fmt::kQuiet) : r;
    return r;
  }
};

// ---- scale: x * factor, rounded as the host's scale() ----------------------------
// Built on the host with make() (the double -> float conversion of the factor
// happens there, as in the host kernel, NaN payload included), then passed to
// kernels by value.

struct ScaleF32 {
  using value_type = float;
  float s = 1.0f;
  static ScaleF32 make(double factor) { return {static_cast<float>(factor)}; }
  CONCORD_HD float operator()(float x) const { return host_nan(mul_rn(x, s), x, s); }
};
struct ScaleF64 {
  using value_type = double;
  double s = 1.0;
  static ScaleF64 make(double factor) { return {factor}; }
  CONCORD_HD double operator()(double x) const { return host_nan(mul_rn(x, s), x, s); }
};
template <class Fmt>
struct Scale16 {
  using value_type = std::uint16_t;
  float s = 1.0f;
  std::uint16_t s16 = 0;  // the factor in 16 bits: the result when only it is NaN
  static Scale16 make(double factor) {
    const float f = static_cast<float>(factor);
    return {f, Fmt::narrow_any(f)};
  }
  CONCORD_HD std::uint16_t operator()(std::uint16_t x) const {
    return finish16<Fmt>(mul_rn(Fmt::widen(x), s), x, s16);
  }
};
// The integer types have no scale; batched copies of them only copy.
struct NoScale {
  using value_type = std::uint8_t;
  static NoScale make(double /*factor*/) { return {}; }
  CONCORD_HD std::uint8_t operator()(std::uint8_t x) const { return x; }
};

// ---- dispatch: the one place that maps (dtype, op) to a functor ------------------

template <DataType D>
struct Element;
template <>
struct Element<DataType::Int8> {
  using type = std::int8_t;
};
template <>
struct Element<DataType::UInt8> {
  using type = std::uint8_t;
};
template <>
struct Element<DataType::Int32> {
  using type = std::int32_t;
};
template <>
struct Element<DataType::Int64> {
  using type = std::int64_t;
};
template <>
struct Element<DataType::Float16> {
  using type = std::uint16_t;
  using format = Half16;
};
template <>
struct Element<DataType::BFloat16> {
  using type = std::uint16_t;
  using format = BFloat16_16;
};
template <>
struct Element<DataType::Float32> {
  using type = float;
};
template <>
struct Element<DataType::Float64> {
  using type = double;
};

// Calls fn(Functor{}) for (D, op); Avg reduces as Sum (the same functor type, so the
// kernels are not instantiated twice). Returns false where !is_supported(D, op).
template <DataType D, class Fn>
bool visit_reduce_op(ReduceOp op, Fn&& fn) {
  using T = typename Element<D>::type;
  if constexpr (D == DataType::Float16 || D == DataType::BFloat16) {
    using Fmt = typename Element<D>::format;
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        fn(Sum16<Fmt>{});
        return true;
      case ReduceOp::Prod:
        fn(Prod16<Fmt>{});
        return true;
      case ReduceOp::Min:
        fn(MinMax16<Fmt, false>{});
        return true;
      case ReduceOp::Max:
        fn(MinMax16<Fmt, true>{});
        return true;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        fn(FloatSum<T>{});
        return true;
      case ReduceOp::Prod:
        fn(FloatProd<T>{});
        return true;
      case ReduceOp::Min:
        fn(FloatMinMax<T, false>{});
        return true;
      case ReduceOp::Max:
        fn(FloatMinMax<T, true>{});
        return true;
    }
  } else {
    switch (op) {
      case ReduceOp::Sum:
        fn(IntSum<T>{});
        return true;
      case ReduceOp::Prod:
        fn(IntProd<T>{});
        return true;
      case ReduceOp::Min:
        fn(IntMin<T>{});
        return true;
      case ReduceOp::Max:
        fn(IntMax<T>{});
        return true;
      case ReduceOp::Avg:
        return false;  // integer Avg is not defined
    }
  }
  return false;
}

template <class Fn>
bool visit_reduce_op(DataType dtype, ReduceOp op, Fn&& fn) {
  switch (dtype) {
    case DataType::Int8:
      return visit_reduce_op<DataType::Int8>(op, fn);
    case DataType::UInt8:
      return visit_reduce_op<DataType::UInt8>(op, fn);
    case DataType::Int32:
      return visit_reduce_op<DataType::Int32>(op, fn);
    case DataType::Int64:
      return visit_reduce_op<DataType::Int64>(op, fn);
    case DataType::Float16:
      return visit_reduce_op<DataType::Float16>(op, fn);
    case DataType::BFloat16:
      return visit_reduce_op<DataType::BFloat16>(op, fn);
    case DataType::Float32:
      return visit_reduce_op<DataType::Float32>(op, fn);
    case DataType::Float64:
      return visit_reduce_op<DataType::Float64>(op, fn);
  }
  return false;
}

// Calls fn(ScaleFunctor::make(factor)) for a floating-point dtype; for an integer
// dtype fn(NoScale{}) when copy_only_ok (batched copies), else returns false.
template <class Fn>
bool visit_scale_op(DataType dtype, double factor, bool copy_only_ok, Fn&& fn) {
  switch (dtype) {
    case DataType::Float16:
      fn(Scale16<Half16>::make(factor));
      return true;
    case DataType::BFloat16:
      fn(Scale16<BFloat16_16>::make(factor));
      return true;
    case DataType::Float32:
      fn(ScaleF32::make(factor));
      return true;
    case DataType::Float64:
      fn(ScaleF64::make(factor));
      return true;
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int32:
    case DataType::Int64:
      if (!copy_only_ok) return false;
      fn(NoScale{});
      return true;
  }
  return false;
}

}  // namespace concord::detail::cuda::ops

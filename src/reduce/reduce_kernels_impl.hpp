// The reduction and scale kernels, written once and compiled once per instruction
// set. No include guard: each kernel TU defines
//   CONCORD_KERNEL_NS    the namespace (also the table's isa name): generic, avx2
//   CONCORD_HALF_ABI_NS  see half.hpp (keeps inline helpers apart between ISAs)
//   CONCORD_KERNEL_AVX2  1 in the AVX2 + F16C + FMA TU: Float16/BFloat16 Sum, Prod
//                        and scale use 256-bit intrinsics (F16C for Float16)
// and then includes this file once, which defines
//   concord::detail::CONCORD_KERNEL_NS::kTable   (a constant-initialised ReduceTable)
// Everything else here has internal linkage, so nothing compiled for one ISA can
// be linked into another ISA's code. The table is constexpr: loading the library
// runs none of this code, whatever the CPU.
//
// The loops are plain element-wise loops over __restrict pointers (one variant per
// aliasing case the contract allows), with branch-free bodies, so the compiler
// auto-vectorises them for whatever ISA the TU is compiled for. The exception is
// Float16/BFloat16 Sum/Prod/scale, whose widen-compute-narrow steps the compiler
// vectorises poorly: they use intrinsics in blocks (AVX2/F16C in the AVX2 TU, SSE2,
// which every x86-64 has, in the generic TU) with the scalar code for the tail.
// Results are bitwise identical between ISAs: every kernel does the same IEEE
// operations, in the same order, with explicit round-to-nearest-even conversions.

#ifndef CONCORD_KERNEL_NS
#error "define CONCORD_KERNEL_NS before including reduce_kernels_impl.hpp"
#endif

#include "reduce/half.hpp"
#include "reduce/reduce_tables.hpp"

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#if CONCORD_KERNEL_AVX2
#if !defined(__AVX2__) || !defined(__F16C__)
#error "CONCORD_KERNEL_AVX2 needs -mavx2 -mf16c"
#endif
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#define CONCORD_KERNEL_STR2(x) #x
#define CONCORD_KERNEL_STR(x) CONCORD_KERNEL_STR2(x)

namespace concord::detail::CONCORD_KERNEL_NS {
namespace {

// ---- element types ----------------------------------------------------------------

// 16-bit float formats: conversions and NaN handling on bit patterns.
struct HalfFormat {
  static constexpr std::uint16_t kQuietBit = 0x0200u;
  static constexpr std::int16_t kInf = 0x7c00;
  static float to_float(std::uint16_t h) { return half_to_float(h); }
  static std::uint16_t from_float(float f) { return float_to_half(f); }
};
struct BFloat16Format {
  static constexpr std::uint16_t kQuietBit = 0x0040u;
  static constexpr std::int16_t kInf = 0x7f80;
  static float to_float(std::uint16_t b) { return bfloat16_to_float(b); }
  static std::uint16_t from_float(float f) { return float_to_bfloat16(f); }
};

template <class F>
struct FloatTraits;
template <>
struct FloatTraits<float> {
  using Bits = std::uint32_t;
  static constexpr Bits kQuietBit = 0x00400000u;
  static Bits to_bits(float f) { return float_bits(f); }
  static float from_bits(Bits u) { return float_from_bits(u); }
};
template <>
struct FloatTraits<double> {
  using Bits = std::uint64_t;
  static constexpr Bits kQuietBit = 0x0008000000000000u;
  static Bits to_bits(double d) { return double_bits(d); }
  static double from_bits(Bits u) { return double_from_bits(u); }
};

// ---- element-wise operations: Op::type, Op::apply(a, b) ---------------------------

// Integers: Sum and Prod in the unsigned type, so overflow wraps (two's complement)
// instead of being undefined. (No 16-bit integer dtype exists, whose unsigned
// product would promote to int and could overflow.)
template <class T>
struct IntSum {
  using type = T;
  static T apply(T x, T y) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  }
};
template <class T>
struct IntProd {
  using type = T;
  static T apply(T x, T y) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(y)));
  }
};
template <class T>
struct IntMin {
  using type = T;
  static T apply(T x, T y) { return y < x ? y : x; }
};
template <class T>
struct IntMax {
  using type = T;
  static T apply(T x, T y) { return x < y ? y : x; }
};

// float / double.
template <class F>
struct FloatSum {
  using type = F;
  static F apply(F x, F y) { return x + y; }
};
template <class F>
struct FloatProd {
  using type = F;
  static F apply(F x, F y) { return x * y; }
};

// Min/Max on float/double: a NaN input gives that NaN, made quiet (a's when both
// are); otherwise the smaller/larger value with -0 < +0. Equal non-NaN inputs
// differ in bits only as +0/-0, so a | b (min) and a & b (max) pick the right zero
// and make the result independent of argument order. All selects, no branches.
template <class F, bool kMax>
struct FloatMinMax {
  using type = F;
  static F apply(F x, F y) {
    using T = FloatTraits<F>;
    using Bits = typename T::Bits;
    const Bits bx = T::to_bits(x);
    const Bits by = T::to_bits(y);
    const bool x_wins = kMax ? (y < x) : (x < y);
    const bool y_wins = kMax ? (x < y) : (y < x);
    Bits r = kMax ? (bx & by) : (bx | by);
    r = x_wins ? bx : r;
    r = y_wins ? by : r;
    r = (y != y) ? (by | T::kQuietBit) : r;
    r = (x != x) ? (bx | T::kQuietBit) : r;
    return T::from_bits(r);
  }
};

// Float16 / BFloat16 arithmetic: widen both to float, compute, round once (RNE).
// (float has at least 2p+2 bits for both formats' precision p, so rounding the float
// sum/product again to 16 bits gives the correctly rounded result.)
struct AddOp {
  static float apply(float x, float y) { return x + y; }
#if CONCORD_KERNEL_AVX2
  static __m256 apply(__m256 x, __m256 y) {
    return _mm256_add_ps(x, y);
  }
#elif defined(__SSE2__)
  static __m128 apply(__m128 x, __m128 y) {
    return _mm_add_ps(x, y);
  }
#endif
};
struct MulOp {
  static float apply(float x, float y) { return x * y; }
#if CONCORD_KERNEL_AVX2
  static __m256 apply(__m256 x, __m256 y) {
    return _mm256_mul_ps(x, y);
  }
#elif defined(__SSE2__)
  static __m128 apply(__m128 x, __m128 y) {
    return _mm_mul_ps(x, y);
  }
#endif
};
template <class Format, class BinOp>
struct Arith16 {
  using type = std::uint16_t;
  static std::uint16_t apply(std::uint16_t x, std::uint16_t y) {
    return Format::from_float(BinOp::apply(Format::to_float(x), Format::to_float(y)));
  }
};

// Float16 / BFloat16 Min/Max directly on the bits (the same result as through
// float, without the conversions). key() maps sign-magnitude to a signed integer in
// numeric order, with -0 (key -1) just below +0 (key 0); it is one-to-one, so equal
// keys mean equal bits. NaNs are handled as for float.
template <class Format, bool kMax>
struct MinMax16 {
  using type = std::uint16_t;
  static int key(std::int16_t s) { return s ^ ((s >> 15) & 0x7fff); }
  static std::uint16_t apply(std::uint16_t x, std::uint16_t y) {
    const auto sx = static_cast<std::int16_t>(x);
    const auto sy = static_cast<std::int16_t>(y);
    const int kx = key(sx);
    const int ky = key(sy);
    const bool x_wins = kMax ? (ky < kx) : (kx < ky);
    std::uint16_t r = x_wins ? x : y;
    r = (sy & 0x7fff) > Format::kInf ? static_cast<std::uint16_t>(y | Format::kQuietBit) : r;
    r = (sx & 0x7fff) > Format::kInf ? static_cast<std::uint16_t>(x | Format::kQuietBit) : r;
    return r;
  }
};

// ---- loops ------------------------------------------------------------------------

// One loop per aliasing case, each with __restrict pointers, so no runtime overlap
// checks are needed and none falls back to a scalar loop when dst == a or dst == b.
template <class Op, class T>
void loop_distinct(T* __restrict d, const T* __restrict x, const T* __restrict y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(x[i], y[i]);
}
template <class Op, class T>
void loop_dst_is_a(T* __restrict d, const T* __restrict y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(d[i], y[i]);
}
template <class Op, class T>
void loop_dst_is_b(T* __restrict d, const T* __restrict x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(x[i], d[i]);
}
template <class Op, class T>
void loop_all_same(T* __restrict d, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(d[i], d[i]);
}

template <class Op>
void reduce_kernel(void* dst, const void* a, const void* b, std::size_t count) {
  using T = typename Op::type;
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if (d == x) {
    if (x == y) {
      loop_all_same<Op>(d, count);
    } else {
      loop_dst_is_a<Op>(d, y, count);
    }
  } else if (d == y) {
    loop_dst_is_b<Op>(d, x, count);
  } else {
    loop_distinct<Op>(d, x, y, count);
  }
}

template <class F>
void scale_float(void* buf, std::size_t count, double factor) {
  F* __restrict p = static_cast<F*>(buf);
  const F s = static_cast<F>(factor);
  for (std::size_t i = 0; i < count; ++i) p[i] = p[i] * s;
}

template <class Format>
void scale_16(void* buf, std::size_t count, double factor) {
  std::uint16_t* __restrict p = static_cast<std::uint16_t*>(buf);
  const float s = static_cast<float>(factor);
  for (std::size_t i = 0; i < count; ++i) {
    p[i] = Format::from_float(Format::to_float(p[i]) * s);
  }
}

// ---- Float16 / BFloat16 Sum, Prod and scale in blocks of intrinsics ---------------
//
// A Block reads kLanes 16-bit values as two float vectors (lo, hi) and writes two
// float vectors back as kLanes 16-bit values, rounding to nearest even exactly as
// the scalar conversions in half.hpp do (NaN: quiet, top payload kept), so the
// vector body and the scalar tail agree bit for bit. Each step loads both inputs
// before it stores, so dst == a or dst == b is fine.

template <class Block, class Format, class BinOp>
void arith16_blocks(void* dst, const void* a, const void* b, std::size_t count) {
  std::uint16_t* d = static_cast<std::uint16_t*>(dst);
  const std::uint16_t* x = static_cast<const std::uint16_t*>(a);
  const std::uint16_t* y = static_cast<const std::uint16_t*>(b);
  std::size_t i = 0;
  for (; i + Block::kLanes <= count; i += Block::kLanes) {
    const typename Block::Floats fx = Block::load(x + i);
    const typename Block::Floats fy = Block::load(y + i);
    Block::store(d + i, {BinOp::apply(fx.lo, fy.lo), BinOp::apply(fx.hi, fy.hi)});
  }
  for (; i < count; ++i) {
    d[i] = Format::from_float(BinOp::apply(Format::to_float(x[i]), Format::to_float(y[i])));
  }
}

template <class Block, class Format>
void scale16_blocks(void* buf, std::size_t count, double factor) {
  std::uint16_t* p = static_cast<std::uint16_t*>(buf);
  const float s = static_cast<float>(factor);
  const auto vs = Block::splat(s);
  std::size_t i = 0;
  for (; i + Block::kLanes <= count; i += Block::kLanes) {
    const typename Block::Floats f = Block::load(p + i);
    Block::store(p + i, {MulOp::apply(f.lo, vs), MulOp::apply(f.hi, vs)});
  }
  for (; i < count; ++i) p[i] = Format::from_float(Format::to_float(p[i]) * s);
}

#if CONCORD_KERNEL_AVX2

// Float16 with F16C; the rounding mode is in the instruction, not taken from MXCSR.
struct HalfBlockF16C {
  static constexpr std::size_t kLanes = 16;
  struct Floats {
    __m256 lo, hi;
  };
  static __m256 splat(float s) { return _mm256_set1_ps(s); }
  static Floats load(const std::uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  static void store(std::uint16_t* p, Floats f) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(f.lo, _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8),
                     _mm256_cvtps_ph(f.hi, _MM_FROUND_TO_NEAREST_INT));
  }
};

// BFloat16: widen by interleaving zeros below each value (unpack within 128-bit
// lanes; lo holds elements 0-3 and 8-11, hi 4-7 and 12-15), narrow by rounding
// each float's bits and packing the top halves back, which undoes that order.
struct BFloat16BlockAvx2 {
  static constexpr std::size_t kLanes = 16;
  struct Floats {
    __m256 lo, hi;
  };
  static __m256 splat(float s) { return _mm256_set1_ps(s); }
  static Floats load(const std::uint16_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, v)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, v))};
  }
  // The bfloat16 bits in the top half of each 32-bit lane, sign-extended into the
  // bottom half so that packs_epi32 passes them through unsaturated.
  static __m256i round(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    const __m256i quiet = _mm256_or_si256(x, _mm256_set1_epi32(0x00400000));
    const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
    const __m256 r =
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet), nan);
    return _mm256_srai_epi32(_mm256_castps_si256(r), 16);
  }
  static void store(std::uint16_t* p, Floats f) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_packs_epi32(round(f.lo), round(f.hi)));
  }
};

constexpr ReduceFn kHalfSum = &arith16_blocks<HalfBlockF16C, HalfFormat, AddOp>;
constexpr ReduceFn kHalfProd = &arith16_blocks<HalfBlockF16C, HalfFormat, MulOp>;
constexpr ScaleFn kHalfScale = &scale16_blocks<HalfBlockF16C, HalfFormat>;
constexpr ReduceFn kBFloat16Sum = &arith16_blocks<BFloat16BlockAvx2, BFloat16Format, AddOp>;
constexpr ReduceFn kBFloat16Prod = &arith16_blocks<BFloat16BlockAvx2, BFloat16Format, MulOp>;
constexpr ScaleFn kBFloat16Scale = &scale16_blocks<BFloat16BlockAvx2, BFloat16Format>;

#elif defined(__SSE2__)

// BFloat16 with SSE2, as BFloat16BlockAvx2 with 128-bit vectors.
struct BFloat16BlockSse2 {
  static constexpr std::size_t kLanes = 8;
  struct Floats {
    __m128 lo, hi;
  };
  static __m128 splat(float s) { return _mm_set1_ps(s); }
  static Floats load(const std::uint16_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i zero = _mm_setzero_si128();
    return {_mm_castsi128_ps(_mm_unpacklo_epi16(zero, v)),
            _mm_castsi128_ps(_mm_unpackhi_epi16(zero, v))};
  }
  static __m128i round(__m128 f) {
    const __m128i x = _mm_castps_si128(f);
    const __m128i lsb = _mm_and_si128(_mm_srli_epi32(x, 16), _mm_set1_epi32(1));
    const __m128i rounded = _mm_add_epi32(_mm_add_epi32(x, _mm_set1_epi32(0x7fff)), lsb);
    const __m128i quiet = _mm_or_si128(x, _mm_set1_epi32(0x00400000));
    const __m128i nan = _mm_castps_si128(_mm_cmpunord_ps(f, f));
    const __m128i r = _mm_or_si128(_mm_and_si128(nan, quiet), _mm_andnot_si128(nan, rounded));
    return _mm_srai_epi32(r, 16);
  }
  static void store(std::uint16_t* p, Floats f) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(round(f.lo), round(f.hi)));
  }
};

constexpr ReduceFn kHalfSum = &reduce_kernel<Arith16<HalfFormat, AddOp>>;
constexpr ReduceFn kHalfProd = &reduce_kernel<Arith16<HalfFormat, MulOp>>;
constexpr ScaleFn kHalfScale = &scale_16<HalfFormat>;
constexpr ReduceFn kBFloat16Sum = &arith16_blocks<BFloat16BlockSse2, BFloat16Format, AddOp>;
constexpr ReduceFn kBFloat16Prod = &arith16_blocks<BFloat16BlockSse2, BFloat16Format, MulOp>;
constexpr ScaleFn kBFloat16Scale = &scale16_blocks<BFloat16BlockSse2, BFloat16Format>;

#else  // no intrinsics: the auto-vectorised loops

constexpr ReduceFn kHalfSum = &reduce_kernel<Arith16<HalfFormat, AddOp>>;
constexpr ReduceFn kHalfProd = &reduce_kernel<Arith16<HalfFormat, MulOp>>;
constexpr ScaleFn kHalfScale = &scale_16<HalfFormat>;
constexpr ReduceFn kBFloat16Sum = &reduce_kernel<Arith16<BFloat16Format, AddOp>>;
constexpr ReduceFn kBFloat16Prod = &reduce_kernel<Arith16<BFloat16Format, MulOp>>;
constexpr ScaleFn kBFloat16Scale = &scale_16<BFloat16Format>;

#endif

// ---- the table --------------------------------------------------------------------

static_assert(static_cast<int>(DataType::Int8) == 0 && static_cast<int>(DataType::UInt8) == 1 &&
              static_cast<int>(DataType::Int32) == 2 && static_cast<int>(DataType::Int64) == 3 &&
              static_cast<int>(DataType::Float16) == 4 &&
              static_cast<int>(DataType::BFloat16) == 5 &&
              static_cast<int>(DataType::Float32) == 6 && static_cast<int>(DataType::Float64) == 7);
static_assert(static_cast<int>(ReduceOp::Sum) == 0 && static_cast<int>(ReduceOp::Prod) == 1 &&
              static_cast<int>(ReduceOp::Min) == 2 && static_cast<int>(ReduceOp::Max) == 3 &&
              static_cast<int>(ReduceOp::Avg) == 4);

}  // namespace

// Rows: Sum, Prod, Min, Max, Avg (Avg reduces as Sum; integer Avg unsupported).
#define CONCORD_INT_ROW(T)                                                            \
  {                                                                                   \
    &reduce_kernel<IntSum<T>>, &reduce_kernel<IntProd<T>>, &reduce_kernel<IntMin<T>>, \
        &reduce_kernel<IntMax<T>>, nullptr                                            \
  }
#define CONCORD_FLOAT_ROW(F)                                                         \
  {                                                                                  \
    &reduce_kernel<FloatSum<F>>, &reduce_kernel<FloatProd<F>>,                       \
        &reduce_kernel<FloatMinMax<F, false>>, &reduce_kernel<FloatMinMax<F, true>>, \
        &reduce_kernel<FloatSum<F>>                                                  \
  }

constexpr ReduceTable kTable = {
    CONCORD_KERNEL_STR(CONCORD_KERNEL_NS),
    {
        CONCORD_INT_ROW(std::int8_t),
        CONCORD_INT_ROW(std::uint8_t),
        CONCORD_INT_ROW(std::int32_t),
        CONCORD_INT_ROW(std::int64_t),
        {kHalfSum, kHalfProd, &reduce_kernel<MinMax16<HalfFormat, false>>,
         &reduce_kernel<MinMax16<HalfFormat, true>>, kHalfSum},
        {kBFloat16Sum, kBFloat16Prod, &reduce_kernel<MinMax16<BFloat16Format, false>>,
         &reduce_kernel<MinMax16<BFloat16Format, true>>, kBFloat16Sum},
        CONCORD_FLOAT_ROW(float),
        CONCORD_FLOAT_ROW(double),
    },
    {nullptr, nullptr, nullptr, nullptr, kHalfScale, kBFloat16Scale, &scale_float<float>,
     &scale_float<double>},
};

#undef CONCORD_INT_ROW
#undef CONCORD_FLOAT_ROW

}  // namespace concord::detail::CONCORD_KERNEL_NS

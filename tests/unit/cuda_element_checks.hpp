// What the CUDA element-op tests share (test_cuda_element_ops.cpp: reduce and the
// NaN rules; test_cuda_scale_ops.cpp: scale): the inputs (special, random and
// exhaustive values by dtype) and the NaN helpers that compare against the host.
#pragma once
#include "reduce/cuda_element_ops.cuh"
#include "reduce/reduce_tables.hpp"
#include "unit/element_types.hpp"
#include "unit/reduce_reference.hpp"

#include <concord/types.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace cuda_element_checks {

using concord::DataType;
using concord::ReduceOp;
using concord::detail::ReduceFn;
using concord::detail::ScaleFn;
namespace ops = concord::detail::cuda::ops;
using concord::test::bitcast;
using concord::test::bits64;
using concord::test::both_nan_other_choice;
using concord::test::is_nan_value;
using concord::test::kAllOps;
using concord::test::kAllTypes;
using concord::test::kFloatTypes;
using concord::test::quieted;
using concord::test::with_element_type;
using reduce_reference::isas;

// ---- inputs -------------------------------------------------------------------------

template <class T>
std::vector<T> special_values(DataType d) {
  std::vector<T> v;
  if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    const auto nan_bits = [](std::uint64_t b32) {
      // A 32-bit NaN pattern, or the double with its sign, quiet bit and payload.
      if constexpr (sizeof(T) == 4) {
        return bitcast<T>(static_cast<Bits>(b32));
      } else {
        const std::uint64_t sign = (b32 >> 31) << 63;
        const std::uint64_t mant = (b32 & 0x7fffffu) << 29;
        return bitcast<T>(sign | 0x7ff0000000000000u | mant | (mant == 0 ? 1u : 0u));
      }
    };
    v = {T(0.0),
         T(-0.0),
         T(1.0),
         T(-1.0),
         T(1.5),
         T(-2.0),
         T(3.0),
         T(1.0) / T(3.0),
         T(0.1),
         L::infinity(),
         -L::infinity(),
         L::max(),
         L::lowest(),
         L::min(),
         -L::min(),
         L::denorm_min(),
         -L::denorm_min(),
         L::min() - L::denorm_min(),  // largest subnormal
         T(0.5) * L::min(),
         L::epsilon(),
         nan_bits(0x7fc00000u),   // quiet, no payload
         nan_bits(0xffc00000u),   // negative quiet (x86's default NaN)
         nan_bits(0x7fc12345u),   // quiet with payload
         nan_bits(0xffe54321u),   // negative quiet with payload
         nan_bits(0x7f800001u),   // signalling, smallest payload
         nan_bits(0x7fa00000u),   // signalling, top payload bit
         nan_bits(0xff812345u),   // negative signalling
         nan_bits(0x7fffffffu)};  // all ones (the GPU's canonical NaN)
  } else if constexpr (std::is_same_v<T, std::uint16_t>) {
    if (d == DataType::Float16) {
      v = {0x0000, 0x8000, 0x3c00, 0xbc00, 0x3e00, 0xc000, 0x3555, 0x7c00, 0xfc00, 0x7bff,
           0xfbff, 0x0400, 0x8400, 0x0001, 0x8001, 0x03ff, 0x0200, 0x7e00, 0xfe00, 0x7e55,
           0xff21, 0x7c01, 0x7d00, 0xfc33, 0x7fff, 0x6800, 0x5bff, 0x1400};
    } else {
      v = {0x0000, 0x8000, 0x3f80, 0xbf80, 0x3fc0, 0xc000, 0x3eab, 0x7f80, 0xff80, 0x7f7f,
           0xff7f, 0x0080, 0x8080, 0x0001, 0x8001, 0x007f, 0x0040, 0x7fc0, 0xffc0, 0x7fd5,
           0xffe1, 0x7f81, 0x7fa0, 0xff93, 0x7fff, 0x4b00, 0x3b80, 0x2000};
    }
  } else {
    using L = std::numeric_limits<T>;
    v = {T(0),
         T(1),
         T(2),
         T(3),
         static_cast<T>(-1),
         static_cast<T>(-2),
         L::max(),
         L::min(),
         static_cast<T>(L::max() - 1),
         static_cast<T>(L::min() + 1),
         static_cast<T>(L::max() / 2 + 1),
         static_cast<T>(0x55),
         static_cast<T>(16),
         static_cast<T>(-128)};
  }
  return v;
}

template <class T>
T random_value(std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  if constexpr (std::is_floating_point_v<T>) {
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    if ((r >> 62) == 0) {  // moderate values: sums and products round
      return static_cast<T>((static_cast<double>(r & 0xffffffffffffu) / 0x1p48 - 0.5) * 2000.0);
    }
    if ((r >> 61) == 2) {  // tiny values: subnormal results
      const Bits tiny = static_cast<Bits>(r) & (sizeof(T) == 4 ? 0x80ffffffu : 0x801fffffffffffffu);
      return bitcast<T>(tiny);
    }
    return bitcast<T>(static_cast<Bits>(r));  // any bits, any exponent, NaNs too
  } else {
    return static_cast<T>(r);
  }
}

// Operand pairs: every special with every special, then `random` random pairs and
// random values against specials.
template <class T>
void make_pairs(DataType d, std::size_t random, std::mt19937_64& rng, std::vector<T>& a,
                std::vector<T>& b) {
  const std::vector<T> s = special_values<T>(d);
  for (T x : s) {
    for (T y : s) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  for (std::size_t i = 0; i < random; ++i) {
    const T r = random_value<T>(rng);
    a.push_back(random_value<T>(rng));
    b.push_back(r);
    a.push_back(r);
    b.push_back(s[i % s.size()]);
    a.push_back(s[(i * 7) % s.size()]);
    b.push_back(random_value<T>(rng));
  }
}

// Every value of an 8-bit type with every other; every 16-bit value with each
// special and with random partners, both ways round.
template <class T>
void make_exhaustive_pairs(DataType d, std::mt19937_64& rng, std::vector<T>& a, std::vector<T>& b) {
  if constexpr (sizeof(T) == 1) {
    for (unsigned x = 0; x < 256; ++x) {
      for (unsigned y = 0; y < 256; ++y) {
        a.push_back(static_cast<T>(x));
        b.push_back(static_cast<T>(y));
      }
    }
  } else if constexpr (sizeof(T) == 2) {
    std::vector<T> partners = special_values<T>(d);
    for (int i = 0; i < 8; ++i) partners.push_back(static_cast<T>(rng()));
    for (unsigned x = 0; x < 65536; ++x) {
      for (T y : partners) {
        a.push_back(static_cast<T>(x));
        b.push_back(y);
        a.push_back(y);
        b.push_back(static_cast<T>(x));
      }
      a.push_back(static_cast<T>(x));  // and one random partner each
      b.push_back(static_cast<T>(rng()));
    }
  }
}

template <class T>
std::string describe(std::size_t i, T x, T y, T want, T got) {
  std::ostringstream s;
  s << std::hex << "element " << std::dec << i << std::hex << ": 0x" << bits64(x) << " op 0x"
    << bits64(y) << ": host 0x" << bits64(want) << ", functor 0x" << bits64(got);
  return s.str();
}

}  // namespace cuda_element_checks

// Inexact floating-point sums: every rank must end with the same bits, close to
// a double-precision reference.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/test_support.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Rank r's random input, reproducible on every rank.
std::vector<double> random_input(int r, std::size_t count) {
  std::mt19937_64 gen(0xC0C0 + static_cast<std::uint64_t>(r));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = dist(gen);
  return v;
}

}  // namespace

TEST_CASE("allreduce results are bitwise identical on every rank", "[bitwise]") {
  using namespace concord;
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  for (DataType dtype :
       {DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
      for (std::size_t count : {std::size_t{1023}, std::size_t{65537}}) {
        const std::size_t esize = size_of(dtype);
        // Inputs rounded to the dtype, and their exact double sum as reference.
        std::vector<std::vector<double>> inputs;
        for (int r = 0; r < ranks; ++r) inputs.push_back(random_input(r, count));
        std::vector<std::byte> mine(count * esize);
        std::vector<double> reference(count, 0.0);
        for (int r = 0; r < ranks; ++r) {
          std::vector<std::byte> rounded(count * esize);
          for (std::size_t i = 0; i < count; ++i) {
            test::store(&rounded[i * esize], dtype, inputs[r][i]);
            reference[i] += test::load(&rounded[i * esize], dtype);
          }
          if (r == comm.rank()) mine = rounded;
        }
        for (Algorithm algorithm : test::all_algorithms()) {
          INFO("dtype=" << to_string(dtype) << " op=" << to_string(op) << " count=" << count
                        << " algorithm=" << to_string(algorithm));
          std::vector<std::byte> out(count * esize);
          allreduce(mine.data(), out.data(), count, dtype, op, comm, {algorithm});

          std::uint64_t hash = fnv1a(out.data(), out.size());
          std::vector<std::uint64_t> hashes(static_cast<std::size_t>(ranks));
          MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
          for (std::uint64_t h : hashes) CHECK(h == hashes[0]);

          // Each step rounds to the dtype: allow ranks roundings of the result's size.
          const double ulp = dtype == DataType::Float16    ? std::ldexp(1.0, -10)
                             : dtype == DataType::BFloat16 ? std::ldexp(1.0, -7)
                             : dtype == DataType::Float32  ? std::ldexp(1.0, -23)
                                                           : std::ldexp(1.0, -52);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < count; ++i) {
            const double expected = op == ReduceOp::Avg ? reference[i] / ranks : reference[i];
            const double scale = op == ReduceOp::Avg ? 1.0 : static_cast<double>(ranks);
            const double tolerance = (ranks + 1) * ulp * scale * 2.0;
            if (!(std::fabs(test::load(&out[i * esize], dtype) - expected) <= tolerance)) ++bad;
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}

namespace {

// A quiet NaN of `dtype` whose payload `payload` (small) names the rank and element.
std::vector<std::byte> nan_bits(concord::DataType dtype, std::uint64_t payload) {
  using concord::DataType;
  std::vector<std::byte> out(concord::size_of(dtype));
  auto put = [&](auto bits) { std::memcpy(out.data(), &bits, sizeof(bits)); };
  switch (dtype) {
    case DataType::Float16:
      put(static_cast<std::uint16_t>(0x7e00u | (payload & 0x1ffu)));
      break;
    case DataType::BFloat16:
      put(static_cast<std::uint16_t>(0x7fc0u | (payload & 0x3fu)));
      break;
    case DataType::Float32:
      put(static_cast<std::uint32_t>(0x7fc00000u | (payload & 0x3fffffu)));
      break;
    default:
      put(std::uint64_t{0x7ff8000000000000ull} | payload);
      break;
  }
  return out;
}

}  // namespace

// Two NaNs with different payloads: whichever payload the kernels keep, every
// rank must keep the same one (recursive doubling's partners make the same kernel
// call). Every float dtype, and counts whose NaNs fall in the kernels' scalar
// tails as well as their vector bodies: the compiler orders the operands of a + b
// differently there, which once made the two partners of recursive doubling keep
// different payloads at counts 1-5 and in the tail of 4099 (float32, float64).
TEST_CASE("NaNs with different payloads on each rank give the same bits everywhere", "[bitwise]") {
  using namespace concord;
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  for (DataType dtype :
       {DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    const std::size_t esize = size_of(dtype);
    for (std::size_t count :
         {std::size_t{1}, std::size_t{3}, std::size_t{5}, std::size_t{257}, std::size_t{4099}}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
        for (Algorithm algorithm : test::all_algorithms()) {
          INFO("dtype=" << to_string(dtype) << " count=" << count << " op=" << to_string(op)
                        << " algorithm=" << to_string(algorithm));
          std::vector<std::byte> in(count * esize);
          for (std::size_t i = 0; i < count; ++i) {
            // A NaN naming the rank on every third element (and the last), small
            // integers elsewhere.
            if (i % 3 == 0 || i + 1 == count) {
              const auto nan = nan_bits(dtype, static_cast<std::uint64_t>(rank + 1 + 16 * i));
              std::memcpy(&in[i * esize], nan.data(), esize);
            } else {
              test::store(&in[i * esize], dtype, static_cast<double>(i % 7) - 3.0);
            }
          }
          std::vector<std::byte> out(count * esize);
          allreduce(in.data(), out.data(), count, dtype, op, comm, {algorithm});
          std::uint64_t hash = fnv1a(out.data(), out.size());
          std::vector<std::uint64_t> hashes(static_cast<std::size_t>(comm.size()));
          MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
          for (std::uint64_t h : hashes) CHECK(h == hashes[0]);
          std::size_t not_nan = 0;
          for (std::size_t i = 0; i < count; ++i) {
            if (i % 3 == 0 || i + 1 == count) {
              not_nan += std::isnan(test::load(&out[i * esize], dtype)) ? 0 : 1;
            }
          }
          CHECK(not_nan == 0);
        }
      }
    }
  }
}

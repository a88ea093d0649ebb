// Inexact floating-point sums: every rank must end with the same bits, close to
// a double-precision reference.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "mpi/test_support.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
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

// Two NaNs with different payloads: whichever payload the kernels keep, every
// rank must keep the same one (recursive doubling reduces its pairs in rank order).
TEST_CASE("NaNs with different payloads on each rank give the same bits everywhere", "[bitwise]") {
  using namespace concord;
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  constexpr std::size_t count = 257;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
    for (Algorithm algorithm : test::all_algorithms()) {
      INFO("op=" << to_string(op) << " algorithm=" << to_string(algorithm));
      std::vector<std::uint32_t> bits(count);
      for (std::size_t i = 0; i < count; ++i) {
        // A quiet NaN whose payload names the rank, on every third element.
        bits[i] = i % 3 == 0 ? 0x7fc00000u | static_cast<std::uint32_t>(rank + 1 + 16 * i)
                             : std::bit_cast<std::uint32_t>(static_cast<float>(i % 7) - 3.0f);
      }
      std::vector<std::uint32_t> out(count);
      allreduce(bits.data(), out.data(), count, DataType::Float32, op, comm, {algorithm});
      std::uint64_t hash = fnv1a(out.data(), out.size() * sizeof(std::uint32_t));
      std::vector<std::uint64_t> hashes(static_cast<std::size_t>(comm.size()));
      MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
      for (std::uint64_t h : hashes) CHECK(h == hashes[0]);
      std::size_t not_nan = 0;
      for (std::size_t i = 0; i < count; i += 3) {
        not_nan += std::isnan(std::bit_cast<float>(out[i])) ? 0 : 1;
      }
      CHECK(not_nan == 0);
    }
  }
}

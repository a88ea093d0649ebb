// The inputs and the expected result of `concord-bench allreduce -c`, computed
// here in doubles, independently of concord: small integers whose reduction is
// exact in every dtype (the average within the dtype's rounding).
#pragma once

#include "common/bench_options.hpp"

#include <cstddef>
#include <vector>

namespace concord::bench {

class Validator {
 public:
  // `ranks` ranks' inputs reduced; `rank`'s own input.
  Validator(const AllreduceOptions& o, int rank, int ranks, std::size_t max_count);
  // The first `count` elements of this rank's input.
  void fill(std::byte* send, std::size_t count) const;
  // Whether `recv` holds the first `count` elements of the reduction.
  bool check(const std::byte* recv, std::size_t count) const;

 private:
  AllreduceOptions o_;
  std::size_t esize_;
  std::vector<std::byte> input_;
  std::vector<std::byte> expected_;
  std::vector<double> expected_avg_;
};

}  // namespace concord::bench

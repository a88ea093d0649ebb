// Command line of concord-bench.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace concord::bench {

struct AllreduceOptions {
  std::size_t min_bytes = 4;
  std::size_t max_bytes = 4194304;
  std::optional<int> iterations;  // OSU defaults when unset: 1000 up to 8 KiB, 100 above
  std::optional<int> warmup;      // 100 up to 8 KiB, 10 above
  bool full_stats = false;
  bool validate = false;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::vector<Algorithm> algorithms{Algorithm::Auto};
  std::vector<std::string> impls{"concord"};
  std::string json_path;
};

int iterations_for(const AllreduceOptions& o, std::size_t bytes);
int warmup_for(const AllreduceOptions& o, std::size_t bytes);

// Parses "MIN:MAX" (also "MAX" alone, meaning MIN = the dtype's size). Throws
// std::invalid_argument with a message for the user.
std::pair<std::size_t, std::size_t> parse_size_range(const std::string& text);

}  // namespace concord::bench

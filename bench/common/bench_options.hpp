// Command line of concord-bench.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
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
  Device device = Device::Cpu;  // --device cuda: buffers in GPU memory
  // --buffers ordinary: host buffers as applications have them (malloc'd, 4 KiB
  // pages, not touched before the first call) instead of 2 MiB-aligned, huge-page,
  // pre-touched ones.
  bool ordinary_buffers = false;
  // --tag KEY=VALUE: written into every JSON record, for what the bench cannot see
  // itself (whether the run's launcher started MPS, say).
  std::vector<std::pair<std::string, std::string>> tags;
};

int iterations_for(const AllreduceOptions& o, std::size_t bytes);

// "a,b,,c" -> {"a", "b", "c"}: the comma lists of --impl, --algo, -T, -o.
std::vector<std::string> split_list(const std::string& text);
int warmup_for(const AllreduceOptions& o, std::size_t bytes);

// Parses -m's "MIN:MAX" (also "MAX" alone, meaning MIN = 0, the smallest element).
// A count may end in K, M or G (powers of 1024): "4:64M". Throws std::invalid_argument
// with a message for the user that names -m.
std::pair<std::size_t, std::size_t> parse_size_range(const std::string& text);

// The sizes -m MIN:MAX measures: MIN (raised to one element if smaller), doubling up
// to MAX. Throws std::invalid_argument when MIN is not a whole number of elements or
// when doubling from MIN does not land on MAX, so no requested size is silently
// skipped or rounded.
std::vector<std::size_t> size_steps(std::size_t min_bytes, std::size_t max_bytes,
                                    std::size_t element_bytes);

}  // namespace concord::bench

#include "bench_options.hpp"

#include <charconv>
#include <stdexcept>

namespace concord::bench {
namespace {
constexpr std::size_t kLargeMessage = 8192;

std::size_t parse_size(const std::string& text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    throw std::invalid_argument("'" + text + "' is not a byte count");
  }
  return value;
}
}  // namespace

int iterations_for(const AllreduceOptions& o, std::size_t bytes) {
  return o.iterations.value_or(bytes <= kLargeMessage ? 1000 : 100);
}
int warmup_for(const AllreduceOptions& o, std::size_t bytes) {
  return o.warmup.value_or(bytes <= kLargeMessage ? 100 : 10);
}

std::pair<std::size_t, std::size_t> parse_size_range(const std::string& text) {
  const auto colon = text.find(':');
  std::size_t lo = 0;
  std::size_t hi = 0;
  if (colon == std::string::npos) {
    hi = parse_size(text);
  } else {
    lo = parse_size(text.substr(0, colon));
    hi = parse_size(text.substr(colon + 1));
  }
  if (hi < lo) throw std::invalid_argument("-m " + text + ": MAX is below MIN");
  if (hi == 0) throw std::invalid_argument("-m " + text + ": MAX must be positive");
  return {lo, hi};
}

}  // namespace concord::bench

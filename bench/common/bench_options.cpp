#include "common/bench_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace concord::bench {
namespace {
constexpr std::size_t kLargeMessage = 8192;
constexpr const char* kRangeHint = "expected MIN:MAX in bytes, e.g. 4:4194304 or 4:4M";

// One byte count of -m: digits, optionally followed by K, M or G (binary).
std::size_t parse_size(const std::string& range, const std::string& text, const char* what) {
  if (text.empty()) {
    throw std::invalid_argument(fmt::format("-m {}: {} is missing ({})", range, what, kRangeHint));
  }
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  std::size_t scale = 1;
  if (ec == std::errc() && ptr + 1 == end) {
    switch (*ptr) {
      case 'K':
      case 'k':
        scale = std::size_t{1} << 10;
        break;
      case 'M':
      case 'm':
        scale = std::size_t{1} << 20;
        break;
      case 'G':
      case 'g':
        scale = std::size_t{1} << 30;
        break;
      default:
        scale = 0;
    }
    if (scale != 0) ++ptr;
  }
  if (ec == std::errc::result_out_of_range ||
      (ec == std::errc() && ptr == end &&
       value > std::numeric_limits<std::size_t>::max() / scale)) {
    throw std::invalid_argument(fmt::format("-m {}: {} '{}' is too large", range, what, text));
  }
  if (ec != std::errc() || ptr != end) {
    throw std::invalid_argument(
        fmt::format("-m {}: {} '{}' is not a byte count ({})", range, what, text, kRangeHint));
  }
  return value * scale;
}
}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

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
    hi = parse_size(text, text, "MAX");
  } else {
    lo = parse_size(text, text.substr(0, colon), "MIN");
    hi = parse_size(text, text.substr(colon + 1), "MAX");
  }
  if (hi == 0) throw std::invalid_argument("-m " + text + ": MAX must be positive");
  if (hi < lo) throw std::invalid_argument("-m " + text + ": MAX is below MIN");
  return {lo, hi};
}

std::vector<std::size_t> size_steps(std::size_t min_bytes, std::size_t max_bytes,
                                    std::size_t element_bytes) {
  const std::size_t lo = std::max(min_bytes, element_bytes);
  if (lo % element_bytes != 0) {
    throw std::invalid_argument(fmt::format(
        "-m: MIN {} bytes is not a whole number of {}-byte elements", lo, element_bytes));
  }
  if (max_bytes < lo) {
    throw std::invalid_argument(
        fmt::format("-m: MAX {} bytes is below one {}-byte element", max_bytes, element_bytes));
  }
  std::vector<std::size_t> sizes{lo};
  while (sizes.back() <= max_bytes / 2) sizes.push_back(sizes.back() * 2);
  if (sizes.back() != max_bytes) {
    const std::size_t below = sizes.back();
    throw std::invalid_argument(fmt::format(
        "-m: sizes double from MIN {} and never reach MAX {}; MAX must be MIN times a power "
        "of two, e.g. -m {}:{} or -m {}:{}",
        lo, max_bytes, lo, below, lo, below * 2));
  }
  return sizes;
}

}  // namespace concord::bench

// `concord-bench fusion --model FILE.tsv`: reading the model file.
#include "fusion/fusion_bench.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace concord::bench {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) items.push_back(item);
  return items;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// A positive decimal count, or nullopt.
std::optional<std::size_t> parse_count(std::string_view text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value == 0) return std::nullopt;
  return value;
}

}  // namespace

Model load_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::invalid_argument(
        fmt::format("--model: cannot open '{}': {}", path, std::strerror(errno)));
  }
  Model model;
  model.path = path;
  std::set<std::string> names;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string_view stripped = trim(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    auto fail = [&](const std::string& what) {
      return std::invalid_argument(
          fmt::format("{}:{}: {} (expected name<TAB>shape<TAB>elements, e.g. "
                      "'conv1.weight\t64x3x7x7\t9408')",
                      path, number, what));
    };
    const std::vector<std::string> fields = split(line, '\t');
    if (fields.size() != 3) {
      throw fail(fmt::format("{} field{} where 3 separated by tabs are expected", fields.size(),
                             fields.size() == 1 ? "" : "s"));
    }
    ModelTensor t;
    t.name = std::string(trim(fields[0]));
    t.shape = std::string(trim(fields[1]));
    const std::string_view elements = trim(fields[2]);
    if (t.name.empty()) throw fail("empty tensor name");
    const auto count = parse_count(elements);
    if (!count) throw fail(fmt::format("elements '{}' is not a positive integer", elements));
    t.elements = *count;
    std::size_t product = 1;
    if (!t.shape.empty()) {
      for (const std::string& dim : split(t.shape, 'x')) {
        const auto d = parse_count(dim);
        if (!d || product > std::numeric_limits<std::size_t>::max() / *d) {
          throw fail(fmt::format("shape '{}' is not dimensions like 64x3x7x7", t.shape));
        }
        product *= *d;
      }
      if (t.shape.back() == 'x') {
        throw fail(fmt::format("shape '{}' is not dimensions like 64x3x7x7", t.shape));
      }
    }
    if (product != t.elements) {
      throw fail(fmt::format("shape '{}' has {} elements, not {}", t.shape, product, t.elements));
    }
    if (!names.insert(t.name).second) {
      throw fail(fmt::format("tensor '{}' is listed twice", t.name));
    }
    constexpr std::size_t kMaxElements = std::numeric_limits<std::size_t>::max() / 8;
    if (t.elements > kMaxElements || model.elements > kMaxElements - t.elements) {
      throw fail("the model is too large");
    }
    model.elements += t.elements;
    model.tensors.push_back(std::move(t));
  }
  if (in.bad()) throw std::invalid_argument(fmt::format("--model: cannot read '{}'", path));
  if (model.tensors.empty()) {
    throw std::invalid_argument(fmt::format("{}: no tensors in the model", path));
  }
  return model;
}

}  // namespace concord::bench

#include <catch2/catch.hpp>

#include "collectives/shared/message_view.hpp"

#include <cstddef>
#include <vector>

using concord::detail::MessageView;
using concord::detail::TensorSpan;

namespace {

struct Run {
  const std::byte* data;
  std::size_t at;
  std::size_t n;
  double scale;
  bool operator==(const Run&) const = default;
};

std::vector<Run> runs(const MessageView& view, std::size_t offset, std::size_t count) {
  std::vector<Run> out;
  view.for_each_run(offset, count, [&](std::byte* p, std::size_t at, std::size_t n, double s) {
    out.push_back({p, at, n, s});
  });
  return out;
}

}  // namespace

TEST_CASE("a one-buffer view is one run from the requested offset", "[message_view]") {
  std::vector<float> buffer(10);
  const MessageView view(buffer.data(), buffer.size(), sizeof(float));
  const auto* base = reinterpret_cast<const std::byte*>(buffer.data());
  CHECK(view.count() == 10);
  CHECK(view.contiguous_data() == reinterpret_cast<std::byte*>(buffer.data()));
  CHECK_FALSE(view.scaled());
  CHECK(runs(view, 0, 10) == std::vector<Run>{{base, 0, 10, 1.0}});
  CHECK(runs(view, 3, 4) == std::vector<Run>{{base + 3 * sizeof(float), 0, 4, 1.0}});
  CHECK(runs(view, 9, 0).empty());
  // A copy walks the same buffer (nothing points into the view itself).
  const MessageView copy = view;
  CHECK(runs(copy, 2, 8) == std::vector<Run>{{base + 2 * sizeof(float), 0, 8, 1.0}});
}

TEST_CASE("a view of spans splits a range at span edges, with each span's scale",
          "[message_view]") {
  std::vector<double> a(3), b(2), c(4);
  auto bytes = [](std::vector<double>& v) { return reinterpret_cast<std::byte*>(v.data()); };
  const MessageView view({{bytes(a), 3, 1.0}, {bytes(b), 2, 0.5}, {bytes(c), 4, 1.0}},
                         sizeof(double));
  CHECK(view.count() == 9);
  CHECK(view.contiguous_data() == nullptr);
  CHECK(view.scaled());
  // Elements 2..7: the last of a, all of b, the first three of c.
  CHECK(runs(view, 2, 6) == std::vector<Run>{{bytes(a) + 2 * sizeof(double), 0, 1, 1.0},
                                             {bytes(b), 1, 2, 0.5},
                                             {bytes(c), 3, 3, 1.0}});
  const MessageView one({{bytes(c), 4, 1.0}}, sizeof(double));
  CHECK(one.contiguous_data() == bytes(c));
  CHECK_FALSE(one.scaled());
  const MessageView none(std::vector<TensorSpan>{}, sizeof(double));
  CHECK(none.count() == 0);
  CHECK(runs(none, 0, 0).empty());
}

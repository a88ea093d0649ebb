// The message a shared-memory algorithm reads and writes: one contiguous buffer,
// or the tensors of a fusion bucket where they lie (so the engine need not pack
// them), each with a factor applied to its result on the way out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace concord::detail {

struct Segment {
  std::byte* data = nullptr;
  std::size_t count = 0;   // elements
  double out_scale = 1.0;  // result = out_scale * reduction
};

class MessageView {
 public:
  // One buffer of `count` elements.
  MessageView(const void* data, std::size_t count, std::size_t elem_size)
      : segments_{{static_cast<std::byte*>(const_cast<void*>(data)), count, 1.0}},
        starts_{0, count},
        elem_size_(elem_size) {}
  // The concatenation of `segments`.
  MessageView(std::vector<Segment> segments, std::size_t elem_size)
      : segments_(std::move(segments)), elem_size_(elem_size) {
    starts_.reserve(segments_.size() + 1);
    starts_.push_back(0);
    for (const Segment& s : segments_) starts_.push_back(starts_.back() + s.count);
  }

  std::size_t count() const { return starts_.back(); }
  // One buffer (a single segment): its start, else nullptr.
  std::byte* contiguous_data() const {
    return segments_.size() == 1 ? segments_.front().data : nullptr;
  }
  bool scaled() const {
    return std::any_of(segments_.begin(), segments_.end(),
                       [](const Segment& s) { return s.out_scale != 1.0; });
  }

  // f(std::byte* data, std::size_t at, std::size_t n, double out_scale) for each
  // contiguous run of [offset, offset + count); `at` counts elements from offset.
  template <typename F>
  void for_each_run(std::size_t offset, std::size_t count, F&& f) const {
    if (count == 0) return;
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    auto s = static_cast<std::size_t>(it - starts_.begin()) - 1;
    std::size_t at = 0;
    while (at < count) {
      const Segment& seg = segments_[s];
      const std::size_t within = offset + at - starts_[s];
      const std::size_t n = std::min(seg.count - within, count - at);
      if (n != 0) f(seg.data + within * elem_size_, at, n, seg.out_scale);
      at += n;
      ++s;
    }
  }

 private:
  std::vector<Segment> segments_;
  std::vector<std::size_t> starts_;  // element offset of each segment, then the total
  std::size_t elem_size_;
};

}  // namespace concord::detail

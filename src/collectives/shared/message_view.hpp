// The message a shared-memory algorithm reads and writes: one contiguous buffer,
// or the tensors of a fusion bucket where they lie (so the engine need not pack
// them), each with a factor applied to its result on the way out.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace concord::detail {

// One tensor where it lies (or the whole buffer of a contiguous message). Not a
// ring "segment": that word is the ring's pipeline chunk (ring_segment_bytes).
struct TensorSpan {
  std::byte* data = nullptr;
  std::size_t count = 0;   // elements
  double out_scale = 1.0;  // result = out_scale * reduction
};

class MessageView {
 public:
  // One buffer of `count` elements. Held inline: the small-message path makes
  // two of these per call and allocates nothing.
  MessageView(const void* data, std::size_t count, std::size_t elem_size)
      : single_{static_cast<std::byte*>(const_cast<void*>(data)), count, 1.0},
        is_single_(true),
        elem_size_(elem_size) {}
  // The concatenation of `spans`.
  MessageView(std::vector<TensorSpan> spans, std::size_t elem_size)
      : spans_(std::move(spans)), elem_size_(elem_size) {
    starts_.reserve(spans_.size() + 1);
    starts_.push_back(0);
    for (const TensorSpan& s : spans_) starts_.push_back(starts_.back() + s.count);
  }

  std::size_t count() const { return is_single_ ? single_.count : starts_.back(); }
  // One buffer (a single span): its start, else nullptr.
  std::byte* contiguous_data() const {
    if (is_single_) return single_.data;
    return spans_.size() == 1 ? spans_.front().data : nullptr;
  }
  bool scaled() const {
    return !is_single_ && std::any_of(spans_.begin(), spans_.end(),
                                      [](const TensorSpan& s) { return s.out_scale != 1.0; });
  }

  // The tensors of a scattered message (not one buffer: contiguous_data() may
  // still be non-null for a single span).
  const std::vector<TensorSpan>& spans() const { return spans_; }
  bool is_single_buffer() const { return is_single_; }

  // f(std::byte* data, std::size_t at, std::size_t n, double out_scale) for each
  // contiguous run of [offset, offset + count); `at` counts elements from offset.
  template <typename F>
  void for_each_run(std::size_t offset, std::size_t count, F&& f) const {
    if (count == 0) return;
    if (is_single_) {
      f(single_.data + offset * elem_size_, std::size_t{0}, count, single_.out_scale);
      return;
    }
    for_each_span_run(offset, count,
                      [&](std::size_t s, std::size_t within, std::size_t at, std::size_t n) {
                        const TensorSpan& span = spans_[s];
                        f(span.data + within * elem_size_, at, n, span.out_scale);
                      });
  }

  // Scattered messages only: f(std::size_t span, std::size_t within, std::size_t
  // at, std::size_t n) for each run of [offset, offset + count) that lies in one
  // span, `within` elements into span number `span`. Runs are the same on every
  // rank whose spans have the same counts, wherever each rank's tensors lie.
  template <typename F>
  void for_each_span_run(std::size_t offset, std::size_t count, F&& f) const {
    if (count == 0) return;
    auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
    auto s = static_cast<std::size_t>(it - starts_.begin()) - 1;
    std::size_t at = 0;
    while (at < count) {
      const std::size_t within = offset + at - starts_[s];
      const std::size_t n = std::min(spans_[s].count - within, count - at);
      if (n != 0) f(s, within, at, n);
      at += n;
      ++s;
    }
  }

 private:
  TensorSpan single_;  // the one buffer, where is_single_
  bool is_single_ = false;
  std::vector<TensorSpan> spans_;    // else the tensors
  std::vector<std::size_t> starts_;  // element offset of each span, then the total
  std::size_t elem_size_;
};

}  // namespace concord::detail

// The engine's fused buckets: device buckets through the device pipeline, host
// buckets in place (shared memory) or packed into a fusion buffer on the packer
// thread while the previous bucket is reduced.
#include "engine/engine_core.hpp"

#include "dispatch/dispatch.hpp"
#include "engine/device_buckets.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>

#include <future>
#include <optional>
#include <vector>

namespace concord::detail {

void EngineCore::run_buckets(const std::vector<std::shared_ptr<Work>>& allreduces,
                             Clock::time_point agreed) {
  if (allreduces.empty()) return;
  std::vector<Bucket> buckets = plan_buckets(allreduces, fusion_threshold_);
  // Device buckets go through the device path, host buckets below; the order of
  // collectives is the same on every rank either way.
  std::erase_if(buckets, [&](const Bucket& b) {
    if (b.device != Device::Cuda) return false;
    reduce_bucket(b, agreed, "device ",
                  [&] { run_device_bucket(b, data_, algorithm_, device_buckets_); });
    return true;
  });
  if (buckets.empty()) return;
  if (!zero_copy_) zero_copy_ = segments_supported(data_, algorithm_);  // same on every rank
  if (*zero_copy_) {
    run_buckets_in_place(buckets, agreed);
  } else {
    run_buckets_packed(buckets, agreed);
  }
}

void EngineCore::run_buckets_packed(const std::vector<Bucket>& buckets, Clock::time_point agreed) {
  const int ranks = data_.size();
  AllreduceOptions options;
  options.algorithm = algorithm_;

  // A bucket of one tensor is reduced where it lies; larger ones go through a
  // buffer, packed on the packer thread while this thread reduces the previous
  // bucket, and unpacked there while this thread reduces the next.
  auto single = [](const Bucket& b) { return b.works.size() == 1; };
  const std::size_t n = buckets.size();
  // What failed, by bucket: its buffer (then it is left out, on every rank alike
  // when the size is beyond what any rank can hold), its packing, its collective.
  std::vector<std::optional<Error>> errors(n);
  std::vector<char> no_buffer(n, 0);
  // Buffers are sized before the pipeline starts: both threads use them.
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t bytes = buckets[k].count * size_of(buckets[k].dtype);
    if (single(buckets[k]) || buffers_[k % 2].size() >= bytes) continue;
    try {
      buffers_[k % 2].resize(bytes);
    } catch (...) {
      errors[k] = to_error(std::current_exception(), data_.rank(),
                           fmt::format("Engine: fusion buffer of {} bytes for {} tensors", bytes,
                                       buckets[k].works.size()));
      no_buffer[k] = 1;
    }
  }
  auto buffer_for = [&](std::size_t k) -> std::byte* {
    const Bucket& b = buckets[k];
    if (single(b)) return static_cast<std::byte*>(b.works[0]->tensor.data);
    return buffers_[k % 2].data();
  };

  // The packer's tasks use the locals of this function: whatever happens here,
  // wait for every task submitted before leaving. (Sized up front: assigning a
  // future cannot throw, so none is lost.)
  std::vector<std::future<void>> packed(n);
  std::vector<std::future<void>> finished(n);
  struct WaitAll {
    std::vector<std::future<void>>& a;
    std::vector<std::future<void>>& b;
    ~WaitAll() {
      for (auto* tasks : {&a, &b}) {
        for (auto& f : *tasks) {
          if (f.valid()) f.wait();
        }
      }
    }
  } wait_all{packed, finished};

  auto prepare = [&](std::size_t k) {
    packed[k] = packer_.submit([&, k] {
      if (no_buffer[k]) return;
      const Bucket& b = buckets[k];
      try {
        const auto begin = Clock::now();
        if (single(b)) {
          const Work& w = *b.works[0];
          if (w.sig.prescale != 1.0) scale(w.tensor.data, w.tensor.count, b.dtype, w.sig.prescale);
        } else {
          pack(b, buffer_for(k));
        }
        if (timeline_) {
          for (const auto& w : b.works) {
            timeline_->span(w->name, "QUEUE", agreed, begin);
            timeline_->span(w->name, "PACK", begin, Clock::now());
          }
        }
      } catch (...) {
        // Read by this thread after it waited for this task.
        errors[k] = to_error(std::current_exception(), data_.rank(), "Engine: packing a bucket");
      }
    });
  };

  prepare(0);
  for (std::size_t k = 0; k < n; ++k) {
    const Bucket& b = buckets[k];
    std::byte* buf = buffer_for(k);
    packed[k].wait();
    // Bucket k+1 goes to the other buffer, which unpack(k-1) has freed
    // (the packer runs tasks in order).
    if (k + 1 < n) prepare(k + 1);
    std::optional<Error> error = errors[k];
    const auto begin = Clock::now();
    // Even after a local packing error the collective runs, so that every rank
    // runs the same ones; its result is not unpacked.
    if (!no_buffer[k]) {
      try {
        dispatch_allreduce("allreduce", buf, buf, b.count, b.dtype, b.op, data_, options);
      } catch (...) {
        if (!error) {
          error = to_error(std::current_exception(), data_.rank(),
                           fmt::format("Engine: allreduce of a bucket of {} tensors, {} bytes",
                                       b.works.size(), b.count * size_of(b.dtype)));
        }
      }
    }
    const auto end = Clock::now();
    finished[k] = packer_.submit([&, k, buf, error, begin, end]() mutable {
      const Bucket& bk = buckets[k];
      const auto unpack_begin = Clock::now();
      try {
        if (!error) {
          if (single(bk)) {
            const Work& w = *bk.works[0];
            const double factor = output_scale(w.sig, ranks);
            if (factor != 1.0) scale(w.tensor.data, w.tensor.count, bk.dtype, factor);
          } else {
            unpack(bk, buf, ranks);
          }
        }
      } catch (...) {
        error = to_error(std::current_exception(), data_.rank(), "Engine: unpacking a bucket");
      }
      const auto unpack_end = Clock::now();
      for (const auto& w : bk.works) {
        if (timeline_) {
          try {
            timeline_->span(w->name, "REDUCE", begin, end,
                            fmt::format("bucket of {} tensors, {} bytes", bk.works.size(),
                                        bk.count * size_of(bk.dtype)));
            timeline_->span(w->name, "UNPACK", unpack_begin, unpack_end);
          } catch (...) {
            // A trace event lost; the tensor still completes.
          }
        }
        complete(w, error);
      }
    });
  }
}

// Runs `reduce` for a bucket reduced in one piece, then records QUEUE and REDUCE
// spans and completes its tensors with the outcome.
void EngineCore::reduce_bucket(const Bucket& b, Clock::time_point agreed, const char* how,
                               const std::function<void()>& reduce) {
  const auto begin = Clock::now();
  std::optional<Error> error;
  try {
    reduce();
  } catch (...) {
    error = to_error(std::current_exception(), data_.rank(),
                     fmt::format("Engine: {}bucket of {} tensors, {} bytes", how, b.works.size(),
                                 b.count * size_of(b.dtype)));
  }
  const auto end = Clock::now();
  for (const auto& w : b.works) {
    if (timeline_) {
      timeline_->span(w->name, "QUEUE", agreed, begin);
      timeline_->span(w->name, "REDUCE", begin, end,
                      fmt::format("{}bucket of {} tensors, {} bytes", how, b.works.size(),
                                  b.count * size_of(b.dtype)));
    }
    complete(w, error);
  }
}

void EngineCore::run_buckets_in_place(const std::vector<Bucket>& buckets,
                                      Clock::time_point agreed) {
  // Shared memory reads each tensor where it lies and writes each result back,
  // scaled: no packing, no extra pass.
  const int ranks = data_.size();
  for (const Bucket& b : buckets) {
    reduce_bucket(b, agreed, "in place, ", [&] {
      std::vector<Segment> segments;
      segments.reserve(b.works.size());
      for (const auto& w : b.works) {
        if (w->sig.prescale != 1.0) {
          scale(w->tensor.data, w->tensor.count, b.dtype, w->sig.prescale);
        }
        segments.push_back({static_cast<std::byte*>(w->tensor.data), w->tensor.count,
                            output_scale(w->sig, ranks)});
      }
      allreduce_segments(std::move(segments), b.dtype, b.op, data_);
    });
  }
}

}  // namespace concord::detail

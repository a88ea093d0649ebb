// The engine's fused buckets. run_buckets() is the one place a bucket's layout
// is chosen: device (a batched-copy fusion buffer on the engine's stream), in
// place (shared memory reads each tensor where it lies) or packed (a host
// fusion buffer). Every layout ends in complete_bucket(), the one place a
// bucket's QUEUE/PACK/REDUCE/UNPACK spans are recorded and its tensors complete.
//
// Device and in-place buckets run one at a time on the engine thread
// (reduce_bucket): their copies are part of the collective (shared-memory rounds,
// the device stream), so there is nothing to overlap. Packed buckets keep their
// own pipeline (PackedPipeline) because it is two threads: bucket k+1 is packed
// and k-1 unpacked on the packer thread while the engine thread reduces k, with
// two buffers and per-bucket futures; forcing the other layouts through it would
// move their prescale and completion onto the packer thread for no gain.
#include "engine/engine_core.hpp"

#include "core/agreement.hpp"
#include "core/communicator_state.hpp"
#include "dispatch/dispatch.hpp"
#include "engine/device_buckets.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <future>
#include <optional>
#include <string>
#include <vector>

namespace concord::detail {

void EngineCore::run_buckets(const std::vector<std::shared_ptr<Work>>& allreduces,
                             Clock::time_point agreed) {
  if (allreduces.empty()) return;
  // The host layout is decided the first time host tensors come (in the same
  // cycle on every rank; it may set up the node's shared memory, which a job
  // with device tensors only never needs).
  const bool any_host =
      std::ranges::any_of(allreduces, [](const auto& w) { return w->sig.device == Device::Cpu; });
  if (!zero_copy_ && any_host) zero_copy_ = tensors_in_place_supported(data_, algorithm_);
  // In place, a bucket costs what one allreduce of its bytes costs, however
  // large its tensors; packed, a large host tensor is cheaper alone (fusion.hpp).
  const bool packed = zero_copy_.has_value() && !*zero_copy_;
  const std::size_t alone_bytes = packed ? fusion_in_place_bytes_ : SIZE_MAX;
  std::vector<Bucket> buckets = plan_buckets(allreduces, fusion_threshold_, alone_bytes);
  size_device_fusion(buckets);
  // Device buckets go through the device path, host buckets below; the order of
  // collectives is the same on every rank either way.
  std::erase_if(buckets, [&](const Bucket& b) {
    if (b.device != Device::Cuda) return false;
    reduce_bucket(b, agreed, "device ",
                  [&] { run_device_bucket(b, data_, algorithm_, device_buckets_); });
    return true;
  });
  if (buckets.empty()) return;
  if (*zero_copy_) {
    run_buckets_in_place(buckets, agreed);
  } else {
    run_buckets_packed(buckets, agreed);
  }
}

// The device fusion buffer is sized before any device bucket runs, as the host
// buffers are (PackedPipeline::size_buffers, which says why): a rank whose cudaMalloc
// failed must not skip a bucket's allreduce that its peers run.
void EngineCore::size_device_fusion(const std::vector<Bucket>& buckets) {
  const DeviceFusionGrowth growth = grow_device_fusion(buckets, device_buckets_);
  if (!growth.grew) return;
  agree_on_fusion_buffers(growth.failed == nullptr);
  if (growth.failed) {
    // Most often cudaMalloc out of memory; making the stream or switching device may
    // fail too. Either way a resource of this rank's, hence SystemError.
    const Error cause = to_error(growth.failed, data_.rank(), "making it");
    throw Error(ErrorCode::SystemError, data_.rank(),
                fmt::format("Engine: device fusion buffer of {} bytes could not be made: {}",
                            growth.bytes, cause.what()));
  }
}

void EngineCore::agree_on_fusion_buffers(bool mine) {
  const int rank = data_.rank();
  const SetupWait wait{"the engine's agreement on its fusion buffers", &data_.state().abort_signal,
                       "the engine stops, and the ranks' collectives are out of step"};
  // On the control communicator: its collectives are the negotiator's, which
  // every rank runs in the same order, all done by now. The data communicator's
  // may differ where it failed on some ranks only (they skip its collectives).
  const bool everywhere = all_ranks_ok(control_.mpi_comm(), mine, rank, wait);
  if (mine && !everywhere) {
    throw Error(ErrorCode::SystemError, rank,
                "Engine: another rank could not allocate a fusion buffer for this cycle's "
                "buckets (its error names the size); the engine stops on every rank");
  }
}

// A bucket of one tensor is reduced where it lies; larger ones go through a
// buffer, packed on the packer thread while the engine thread reduces the previous
// bucket, and unpacked there while the engine thread reduces the next.
class EngineCore::PackedPipeline {
 public:
  PackedPipeline(EngineCore& core, const std::vector<Bucket>& buckets, Clock::time_point agreed)
      : core_(core),
        buckets_(buckets),
        agreed_(agreed),
        errors_(buckets.size()),
        no_buffer_(buckets.size(), 0),
        packed_at_(buckets.size()),
        packed_(buckets.size()),
        finished_(buckets.size()) {
    options_.algorithm = core.algorithm_;
    size_buffers();
  }
  PackedPipeline(const PackedPipeline&) = delete;
  PackedPipeline& operator=(const PackedPipeline&) = delete;
  // The packer's tasks use this object: whatever happens, wait for every task
  // submitted before it goes. (The futures are sized up front: assigning one
  // cannot throw, so none is lost.)
  ~PackedPipeline() {
    for (auto* tasks : {&packed_, &finished_}) {
      for (auto& f : *tasks) {
        if (f.valid()) f.wait();
      }
    }
  }

  void run() {
    if (buckets_.empty()) return;
    prepare(0);
    for (std::size_t k = 0; k < buckets_.size(); ++k) reduce(k);
  }

 private:
  static bool single(const Bucket& b) { return b.works.size() == 1; }

  // Buffers are sized before the pipeline starts: both threads use them. Every
  // rank plans the same buckets and grows the same buffers, so two failures are
  // told apart:
  //   - a size no buffer can hold (beyond max_size) is the same on every rank:
  //     that bucket is left out everywhere, its tensors fail, the engine goes on;
  //   - an allocation that fails (std::bad_alloc) may fail on some ranks only, and
  //     a rank without its buffer must not skip a bucket's allreduce that its
  //     peers run. So where a buffer grew (in the same cycles on every rank), the
  //     ranks agree that every one has it; if one has not, every rank throws and
  //     the engines stop.
  void size_buffers() {
    // Where this rank's allocation failed; its message is made after the
    // agreement, so that nothing (a message's own allocation) keeps it from it.
    std::exception_ptr failed;
    const Bucket* failed_bucket = nullptr;
    bool grew = false;
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const Bucket& b = buckets_[k];
      std::vector<std::byte>& buffer = core_.buffers_[k % 2];
      const std::size_t bytes = b.count * size_of(b.dtype);
      if (single(b) || buffer.size() >= bytes) continue;
      if (bytes > buffer.max_size()) {
        no_buffer_[k] = 1;
        errors_[k] =
            Error(ErrorCode::SystemError, core_.data_.rank(),
                  buffer_name(b) + ": cannot allocate memory (more than a buffer can hold)");
        continue;
      }
      grew = true;
      if (failed) continue;
      try {
        buffer.resize(bytes);
      } catch (...) {
        failed = std::current_exception();
        failed_bucket = &b;
      }
    }
    if (!grew) return;
    core_.agree_on_fusion_buffers(failed == nullptr);
    if (failed) throw to_error(failed, core_.data_.rank(), buffer_name(*failed_bucket));
  }

  static std::string buffer_name(const Bucket& b) {
    return fmt::format("Engine: fusion buffer of {} bytes for {} tensors",
                       b.count * size_of(b.dtype), b.works.size());
  }

  std::byte* buffer_for(std::size_t k) const {
    const Bucket& b = buckets_[k];
    if (single(b)) return static_cast<std::byte*>(b.works[0]->tensor.data);
    return core_.buffers_[k % 2].data();
  }

  // On the packer thread: prescale a single tensor, or pack the bucket.
  void prepare(std::size_t k) {
    packed_[k] = core_.packer_.submit([this, k] { pack(k); });
  }
  void pack(std::size_t k) {
    if (no_buffer_[k]) return;
    const Bucket& b = buckets_[k];
    try {
      const auto begin = Clock::now();
      if (single(b)) {
        const Work& w = *b.works[0];
        if (w.sig.prescale != 1.0) scale(w.tensor.data, w.tensor.count, b.dtype, w.sig.prescale);
      } else {
        detail::pack(b, buffer_for(k));
      }
      // Read by finish(k), on this thread after this task.
      packed_at_[k] = Span{begin, Clock::now()};
    } catch (...) {
      // Read by the engine thread after it waited for this task.
      errors_[k] =
          to_error(std::current_exception(), core_.data_.rank(), "Engine: packing a bucket");
    }
  }

  // On the engine thread: bucket k's collective, then its unpacking is queued.
  void reduce(std::size_t k) {
    const Bucket& b = buckets_[k];
    std::byte* buf = buffer_for(k);
    packed_[k].wait();
    // Bucket k+1 goes to the other buffer, which unpack(k-1) has freed
    // (the packer runs tasks in order).
    if (k + 1 < buckets_.size()) prepare(k + 1);
    std::optional<Error> error = errors_[k];
    const auto begin = Clock::now();
    // Even after a local packing error the collective runs, so that every rank
    // runs the same ones; its result is not unpacked.
    // A bucket left out for its size is left out on every rank (size_buffers).
    if (!no_buffer_[k]) {
      try {
        dispatch_allreduce("allreduce", buf, buf, b.count, b.dtype, b.op, core_.data_, options_);
      } catch (...) {
        const Error failed = to_error(std::current_exception(), core_.data_.rank(),
                                      "Engine: allreduce of a " + describe_bucket(b, ""));
        core_.fail_if_out_of_step(failed);
        if (!error) error = failed;
      }
    }
    const auto end = Clock::now();
    finished_[k] = core_.packer_.submit(
        [this, k, buf, error, begin, end] { finish(k, buf, error, begin, end); });
  }

  // On the packer thread: scale or unpack the result, then complete the tensors.
  void finish(std::size_t k, std::byte* buf, std::optional<Error> error, Clock::time_point begin,
              Clock::time_point end) {
    const Bucket& b = buckets_[k];
    const int ranks = core_.data_.size();
    const auto unpack_begin = Clock::now();
    try {
      if (!error) {
        if (single(b)) {
          const Work& w = *b.works[0];
          const double factor = output_scale(w.sig, ranks);
          if (factor != 1.0) scale(w.tensor.data, w.tensor.count, b.dtype, factor);
        } else {
          unpack(b, buf, ranks);
        }
      }
    } catch (...) {
      error = to_error(std::current_exception(), core_.data_.rank(), "Engine: unpacking a bucket");
    }
    core_.complete_bucket(
        b, "", {agreed_, {begin, end}, packed_at_[k], Span{unpack_begin, Clock::now()}}, error);
  }

  EngineCore& core_;
  const std::vector<Bucket>& buckets_;
  Clock::time_point agreed_;
  AllreduceOptions options_;
  // What failed, by bucket: its buffer's size, its packing (its collective's
  // error is passed on).
  std::vector<std::optional<Error>> errors_;
  std::vector<char> no_buffer_;                 // left out on every rank: no buffer holds its size
  std::vector<std::optional<Span>> packed_at_;  // when each bucket was packed
  std::vector<std::future<void>> packed_;
  std::vector<std::future<void>> finished_;
};

void EngineCore::run_buckets_packed(const std::vector<Bucket>& buckets, Clock::time_point agreed) {
  PackedPipeline(*this, buckets, agreed).run();
}

// Runs `reduce` for a bucket reduced in one piece on this thread, then completes it.
void EngineCore::reduce_bucket(const Bucket& b, Clock::time_point agreed, const char* how,
                               const std::function<void()>& reduce) {
  const auto begin = Clock::now();
  std::optional<Error> error;
  try {
    reduce();
  } catch (...) {
    error = to_error(std::current_exception(), data_.rank(), "Engine: " + describe_bucket(b, how));
    fail_if_out_of_step(*error);  // a device copy that failed on this rank alone, say
  }
  complete_bucket(b, how, BucketPhases{agreed, {begin, Clock::now()}, {}, {}}, error);
}

std::string EngineCore::describe_bucket(const Bucket& b, const char* how) {
  return fmt::format("{}bucket of {} tensors, {} bytes", how, b.works.size(),
                     b.count * size_of(b.dtype));
}

void EngineCore::complete_bucket(const Bucket& b, const char* how, const BucketPhases& phases,
                                 const std::optional<Error>& error) {
  if (timeline_) {
    try {
      const std::string detail = describe_bucket(b, how);
      // Queued until its packing began (or, not packed, until its collective).
      const Clock::time_point queued_until = phases.pack ? phases.pack->first : phases.reduce.first;
      for (const auto& w : b.works) {
        timeline_->span(w->name, "QUEUE", phases.agreed, queued_until);
        if (phases.pack) timeline_->span(w->name, "PACK", phases.pack->first, phases.pack->second);
        timeline_->span(w->name, "REDUCE", phases.reduce.first, phases.reduce.second, detail);
        if (phases.unpack) {
          timeline_->span(w->name, "UNPACK", phases.unpack->first, phases.unpack->second);
        }
      }
    } catch (...) {
      // Trace events lost (the detail could not be formatted); the tensors still complete.
    }
  }
  for (const auto& w : b.works) complete(w, error);
}

void EngineCore::run_buckets_in_place(const std::vector<Bucket>& buckets,
                                      Clock::time_point agreed) {
  // Shared memory reads each tensor where it lies and writes each result back,
  // scaled: no packing, no extra pass.
  const int ranks = data_.size();
  for (const Bucket& b : buckets) {
    reduce_bucket(b, agreed, "in place, ", [&] {
      std::vector<TensorSpan> tensors;
      tensors.reserve(b.works.size());
      for (const auto& w : b.works) {
        if (w->sig.prescale != 1.0) {
          scale(w->tensor.data, w->tensor.count, b.dtype, w->sig.prescale);
        }
        tensors.push_back({static_cast<std::byte*>(w->tensor.data), w->tensor.count,
                           output_scale(w->sig, ranks)});
      }
      allreduce_tensors_in_place(std::move(tensors), b.dtype, b.op, data_);
    });
  }
}

}  // namespace concord::detail

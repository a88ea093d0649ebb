#include "engine/engine_core.hpp"

#include "collectives/algorithms.hpp"
#include "collectives/allreduce_segments.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "device/device_path.hpp"
#include "reduce/reduce_kernels.hpp"
#include "transport/mpi_transport.hpp"

#include <concord/allreduce.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <limits>
#include <new>
#include <stdexcept>
#include <unordered_set>
#include <utility>

namespace concord {
namespace detail {
namespace {

void require_thread_multiple(int rank) {
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread", rank);
  if (level < MPI_THREAD_MULTIPLE) {
    throw Error(ErrorCode::InvalidArgument, rank,
                "Engine: MPI was initialised without MPI_THREAD_MULTIPLE; the engine talks MPI "
                "from its own thread. Initialise with MPI_Init_thread(MPI_THREAD_MULTIPLE), or "
                "let concord initialise MPI");
  }
}

// The error an operation fails with when the exception `e` escaped it: a
// concord::Error as it is; an allocation that failed (std::bad_alloc, or
// std::length_error for a size no container can hold) as SystemError; anything
// else as Internal. `context` says what failed ("Engine: tensor 'x'").
Error to_error(const std::exception_ptr& e, int rank, const std::string& context) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return error;
  } catch (const std::bad_alloc& error) {
    return Error(ErrorCode::SystemError, rank,
                 fmt::format("{}: cannot allocate memory ({})", context, error.what()));
  } catch (const std::length_error& error) {
    return Error(ErrorCode::SystemError, rank,
                 fmt::format("{}: cannot allocate memory ({})", context, error.what()));
  } catch (const std::exception& error) {
    return Error(ErrorCode::Internal, rank,
                 fmt::format("{}: unexpected exception: {}", context, error.what()));
  } catch (...) {
    return Error(ErrorCode::Internal, rank, fmt::format("{}: unknown exception", context));
  }
}

// Prints why the engine stops; never throws (it runs where an exception would
// end in std::terminate).
void report_stop(const std::exception_ptr& e, int rank) noexcept {
  try {
    fmt::print(stderr, "{}\nconcord: engine stops\n", to_error(e, rank, "Engine").what());
  } catch (...) {
    std::fputs("concord: engine: unexpected exception; the engine stops\n", stderr);
  }
}

}  // namespace

EngineCore::EngineCore(const Communicator& comm, const EngineOptions& options)
    : data_((require_thread_multiple(comm.rank()), Communicator(comm.mpi_comm()))),
      control_(comm.mpi_comm()),
      fusion_threshold_(options.fusion_threshold.value_or(config().fusion_threshold)),
      cycle_time_ms_(options.cycle_time_ms.value_or(config().cycle_time_ms)),
      stall_{options.stall_warning_s.value_or(config().stall_warning_s),
             options.stall_timeout_s.value_or(config().stall_timeout_s)},
      algorithm_(options.algorithm) {
  const std::string path = options.timeline_path.value_or(config().timeline_path);
  if (!path.empty() && data_.rank() == 0) timeline_ = std::make_unique<Timeline>(path, 0);
  thread_ = std::jthread([this] {
    try {
      loop();
    } catch (...) {
      // loop() catches what its cycles throw; this is the last resort against
      // std::terminate (an allocation failing while it fails the last handles).
      std::fputs("concord: engine: unexpected exception while stopping\n", stderr);
    }
  });
  engine_thread_id_ = thread_.get_id();
}

EngineCore::~EngineCore() {
  shutdown();
}

bool EngineCore::on_engine_thread() const noexcept {
  const auto me = std::this_thread::get_id();
  return me == engine_thread_id_.load() || me == packer_.id();
}

void EngineCore::shutdown() {
  {
    // Under the mutex: the engine thread checks the flag under it before it
    // sleeps, so it cannot miss this wakeup.
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
  }
  wake_.notify_all();
  // From a completion callback (engine or packer thread) joining would wait for
  // the callback itself: the stop is requested; the owner joins later.
  if (on_engine_thread()) return;
  std::lock_guard join(join_mutex_);
  if (thread_.joinable()) {
    thread_.join();
    engine_thread_id_ = std::thread::id{};  // ids are reused by later threads
  }
}

void EngineCore::validate(const Work& w) const {
  const int rank = data_.rank();
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("Engine: tensor '{}': {}", w.name, what));
  };
  if (w.name.empty()) bad("the name is empty");
  if (w.tensor.device != Device::Cpu && w.tensor.device != Device::Cuda) bad("unknown Device");
  if (w.tensor.device == Device::Cuda && !cuda_built()) {
    bad("CUDA tensors need a concord built with CUDA (CONCORD_WITH_CUDA)");
  }
  if (w.tensor.device == Device::Cuda && !cuda_available()) {
    bad("a CUDA tensor, but this process sees no CUDA device");
  }
  if (w.tensor.data == nullptr && w.tensor.count > 0) bad("null data with count > 0");
  if (static_cast<unsigned>(w.sig.dtype) > static_cast<unsigned>(DataType::Float64)) {
    bad("unknown DataType");
  }
  if (w.tensor.count > std::numeric_limits<std::size_t>::max() / size_of(w.sig.dtype)) {
    bad(fmt::format("count {} is too large: its size in bytes overflows", w.tensor.count));
  }
  switch (w.sig.kind) {
    case WorkKind::Allreduce:
      if (static_cast<unsigned>(w.sig.op) > static_cast<unsigned>(ReduceOp::Avg)) {
        bad("unknown ReduceOp");
      }
      if (!is_supported(w.sig.dtype, w.sig.op)) {
        bad(fmt::format("{} is not defined for {}", to_string(w.sig.op), to_string(w.sig.dtype)));
      }
      if (!is_floating_point(w.sig.dtype) && (w.sig.prescale != 1.0 || w.sig.postscale != 1.0)) {
        bad("prescale/postscale must be 1 for integer tensors");
      }
      break;
    case WorkKind::Broadcast:
      if (w.sig.root < 0 || w.sig.root >= data_.size()) {
        bad(fmt::format("root {} is not a rank of this engine (size {})", w.sig.root,
                        data_.size()));
      }
      break;
    case WorkKind::Allgather:
      if (w.sig.count == 0) bad("row_elements must be > 0");
      if (w.tensor.count % w.sig.count != 0) {
        bad(fmt::format("count {} is not a multiple of row_elements {}", w.tensor.count,
                        w.sig.count));
      }
      break;
  }
}

std::vector<Handle> EngineCore::submit(std::vector<std::shared_ptr<Work>> works) {
  for (const auto& w : works) validate(*w);
  for (const auto& w : works) {
    if (w->tensor.device == Device::Cuda && w->tensor.count > 0) {
      w->ready = record_ready_event(w->tensor.data, w->tensor.stream);
    }
  }
  std::vector<Handle> handles;
  {
    std::lock_guard lock(mutex_);
    if (stopped_ || stop_requested_) {
      throw Error(ErrorCode::Shutdown, data_.rank(), "Engine: enqueue after shutdown");
    }
    std::unordered_set<std::string> names;
    for (const auto& w : works) {
      if (in_flight_.contains(w->name) || !names.insert(w->name).second) {
        throw Error(ErrorCode::InvalidArgument, data_.rank(),
                    fmt::format("Engine: tensor '{}' is already in flight: a name may be "
                                "enqueued again only after its previous operation completed",
                                w->name));
      }
    }
    for (auto& w : works) {
      in_flight_.emplace(w->name, w);
      w->enqueued = Clock::now();
      queue_.push_back(w);
      handles.push_back(Handle(w));
    }
  }
  return handles;
}

void EngineCore::complete(const std::shared_ptr<Work>& work, std::optional<Error> error) {
  if (work->claimed.exchange(true)) return;  // completed already
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(work->name);
  }
  work->finish(std::move(error));
}

void EngineCore::loop() {
  try {
    cycles();
  } catch (...) {
    // The negotiator could not be made, or a cycle failed: the ranks no longer
    // agree, so this engine stops (its peers stop on their next cycle with it,
    // or give up on it when they shut down).
    report_stop(std::current_exception(), data_.rank());
  }
  // Fail what is left: whatever was submitted and has not completed.
  std::vector<std::shared_ptr<Work>> left;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    queue_.clear();
    left.reserve(in_flight_.size());
    for (const auto& [name, w] : in_flight_) left.push_back(w);
  }
  for (auto& w : left) {
    // Every handle must complete, even if formatting its message fails.
    std::optional<Error> error;
    try {
      error.emplace(ErrorCode::Shutdown, data_.rank(),
                    fmt::format("Engine: tensor '{}': the engine shut down first", w->name));
    } catch (...) {
      error.emplace(ErrorCode::Shutdown, data_.rank(), "Engine: the engine shut down first");
    }
    complete(w, std::move(error));
  }
}

void EngineCore::cycles() {
  Negotiator negotiator(control_.mpi_comm(), control_.rank(), control_.size(), stall_);
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(cycle_time_ms_));
  for (;;) {
    const auto start = Clock::now();
    std::vector<std::shared_ptr<Work>> fresh;
    {
      std::lock_guard lock(mutex_);
      fresh.swap(queue_);
    }
    const bool stopping = stop_requested_;
    // Peers may already be gone when we shut down: do not wait for ever. An
    // exception here ends the cycles (loop() fails the pending handles).
    Negotiator::Outcome out = negotiator.cycle(std::move(fresh), stopping, stopping ? 10.0 : 0.0);
    for (auto& [w, error] : out.failed) complete(w, error);
    if (!out.ready.empty()) {
      try {
        execute(out.ready, Clock::now());
      } catch (...) {
        // execute() fails a collective that throws by itself; this is the last
        // resort for the rest (an allocation failing between collectives).
        // This rank may now have skipped a collective its peers run, so the
        // ranks no longer agree on the order: every tensor of the cycle fails,
        // and the engine stops (loop() fails the rest), rather than go on out
        // of step. Peers waiting in the skipped collective wait until this
        // process exits (an unhandled error ends it, and mpiexec the job).
        const Error error = to_error(std::current_exception(), data_.rank(), "Engine");
        for (const auto& w : out.ready) complete(w, error);
        throw;
      }
    }
    if (out.shutdown) break;
    std::unique_lock lock(mutex_);
    wake_.wait_until(lock, start + cycle, [&] { return stop_requested_.load(); });
  }
}

void EngineCore::execute(const std::vector<std::shared_ptr<Work>>& ready,
                         Clock::time_point agreed) {
  if (timeline_) {
    for (const auto& w : ready) timeline_->span(w->name, "NEGOTIATE", w->enqueued, agreed);
  }
  // Allreduces run in fused buckets; a broadcast or allgather closes the run
  // before it, so every rank runs the same collectives in the same order.
  std::vector<std::shared_ptr<Work>> run;
  for (const auto& w : ready) {
    if (w->sig.kind == WorkKind::Allreduce) {
      run.push_back(w);
      continue;
    }
    run_buckets(run, agreed);
    run.clear();
    const auto begin = Clock::now();
    try {
      if (w->sig.kind == WorkKind::Broadcast) {
        run_broadcast(*w);
      } else {
        run_allgather(*w);
      }
    } catch (...) {
      complete(w, to_error(std::current_exception(), data_.rank(),
                           fmt::format("Engine: tensor '{}'", w->name)));
      continue;
    }
    if (timeline_) {
      timeline_->span(w->name, w->sig.kind == WorkKind::Broadcast ? "BROADCAST" : "ALLGATHER",
                      begin, Clock::now());
    }
    complete(w, std::nullopt);
  }
  run_buckets(run, agreed);
}

void EngineCore::run_buckets(const std::vector<std::shared_ptr<Work>>& allreduces,
                             Clock::time_point agreed) {
  if (allreduces.empty()) return;
  std::vector<Bucket> buckets = plan_buckets(allreduces, fusion_threshold_);
  // Device buckets go through the device path, host buckets below; the order of
  // collectives is the same on every rank either way.
  std::erase_if(buckets, [&](const Bucket& b) {
    if (b.device != Device::Cuda) return false;
    reduce_bucket(b, agreed, "device ", [&] { run_device_bucket(b, data_, algorithm_); });
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
        concord::allreduce(buf, buf, b.count, b.dtype, b.op, data_, options);
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

void EngineCore::run_broadcast(Work& w) {
  MpiTransport transport(data_.mpi_comm());
  const std::size_t bytes = w.tensor.count * size_of(w.sig.dtype);
  if (data_.size() == 1 || bytes == 0) return;
  if (w.sig.device == Device::Cuda) {
    // Broadcasts are rare (initial weights): through host memory.
    std::vector<std::byte> host(bytes);
    if (data_.rank() == w.sig.root) copy_device_to_host(host.data(), w.tensor.data, bytes, w.ready);
    broadcast_binomial(transport, host.data(), bytes, w.sig.root);
    if (data_.rank() != w.sig.root) {
      copy_host_to_device(w.tensor.data, host.data(), bytes, w.ready);
    }
    return;
  }
  broadcast_binomial(transport, w.tensor.data, bytes, w.sig.root);
}

void EngineCore::run_allgather(Work& w) {
  MpiTransport transport(data_.mpi_comm());
  const auto ranks = static_cast<std::size_t>(data_.size());
  std::vector<std::uint64_t> dims(ranks);
  const std::uint64_t mine = w.tensor.count / w.sig.count;
  allgatherv_ring(transport, &mine, dims.data(),
                  std::vector<std::size_t>(ranks, sizeof(std::uint64_t)));
  // Sizes from every rank's rows: the same on every rank, and so is a failure.
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  auto too_large = [&] {
    return Error(ErrorCode::InvalidArgument, data_.rank(),
                 fmt::format("Engine: tensor '{}': the gathered size in bytes overflows", w.name));
  };
  const std::size_t esize = size_of(w.sig.dtype);
  if (w.sig.count > kMax / esize) throw too_large();
  const std::size_t row_bytes = w.sig.count * esize;
  std::vector<std::size_t> block_bytes(ranks);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (row_bytes != 0 && dims[r] > kMax / row_bytes) throw too_large();
    block_bytes[r] = dims[r] * row_bytes;
    if (block_bytes[r] > kMax - total) throw too_large();
    total += block_bytes[r];
  }
  std::vector<std::byte> out(total);
  const void* mine_rows = w.tensor.data;
  std::vector<std::byte> staged;  // device tensors: gathered on the host (Handle::output)
  if (w.sig.device == Device::Cuda) {
    staged.resize(block_bytes[static_cast<std::size_t>(data_.rank())]);
    copy_device_to_host(staged.data(), w.tensor.data, staged.size(), w.ready);
    mine_rows = staged.data();
  }
  allgatherv_ring(transport, mine_rows, out.data(), block_bytes);
  w.output = std::move(out);
  w.first_dims.assign(dims.begin(), dims.end());
}

}  // namespace detail

// ---- public API ----

Engine::Engine(const Communicator& comm, const EngineOptions& options)
    : core_(std::make_unique<detail::EngineCore>(comm, options)) {}

Engine::~Engine() = default;

void Engine::shutdown() {
  core_->shutdown();
}
int Engine::rank() const {
  return core_->rank();
}
int Engine::size() const {
  return core_->size();
}

namespace {
std::shared_ptr<detail::Work> make_work(const std::string& name, TensorView tensor,
                                        detail::Signature sig, Completion done) {
  auto w = std::make_shared<detail::Work>();
  w->name = name;
  w->tensor = tensor;
  sig.dtype = tensor.dtype;
  sig.device = tensor.device;
  w->sig = sig;
  w->done = std::move(done);
  return w;
}
}  // namespace

Handle Engine::enqueue_allreduce(const std::string& name, TensorView tensor, ReduceOp op,
                                 double prescale, double postscale, Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Allreduce;
  sig.op = op;
  sig.count = tensor.count;
  sig.prescale = prescale;
  sig.postscale = postscale;
  return core_->submit({make_work(name, tensor, sig, std::move(done))}).front();
}

std::vector<Handle> Engine::enqueue_grouped_allreduce(const std::vector<std::string>& names,
                                                      const std::vector<TensorView>& tensors,
                                                      ReduceOp op, double prescale,
                                                      double postscale, Completion done) {
  if (names.size() != tensors.size()) {
    throw Error(ErrorCode::InvalidArgument, rank(),
                fmt::format("Engine: grouped allreduce with {} names but {} tensors", names.size(),
                            tensors.size()));
  }
  // One completion for the group: the last tensor to finish reports the first error.
  struct Group {
    std::mutex mutex;
    std::size_t remaining;
    std::optional<Error> error;
    Completion done;
  };
  std::shared_ptr<Group> group;
  if (done) {
    group = std::make_shared<Group>();
    group->remaining = names.size();
    group->done = std::move(done);
  }
  std::vector<std::shared_ptr<detail::Work>> works;
  for (std::size_t i = 0; i < names.size(); ++i) {
    detail::Signature sig;
    sig.kind = detail::WorkKind::Allreduce;
    sig.op = op;
    sig.count = tensors[i].count;
    sig.prescale = prescale;
    sig.postscale = postscale;
    Completion each;
    if (group) {
      each = [group](const Error* error) {
        bool last = false;
        {
          std::lock_guard lock(group->mutex);
          if (error != nullptr && !group->error) group->error = *error;
          last = --group->remaining == 0;
        }
        if (last) group->done(group->error ? &*group->error : nullptr);
      };
    }
    works.push_back(make_work(names[i], tensors[i], sig, std::move(each)));
  }
  return core_->submit(std::move(works));
}

Handle Engine::enqueue_broadcast(const std::string& name, TensorView tensor, int root,
                                 Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Broadcast;
  sig.count = tensor.count;
  sig.root = root;
  return core_->submit({make_work(name, tensor, sig, std::move(done))}).front();
}

Handle Engine::enqueue_allgather(const std::string& name, TensorView tensor,
                                 std::size_t row_elements, Completion done) {
  detail::Signature sig;
  sig.kind = detail::WorkKind::Allgather;
  sig.count = row_elements;
  auto w = make_work(name, tensor, sig, std::move(done));
  if (row_elements != 0) w->first_dim = tensor.count / row_elements;
  return core_->submit({w}).front();
}

namespace {
std::mutex default_mutex;
// Never destroyed by a static destructor (those run after MPI_Finalize, and
// possibly on a thread the engine owns): shutdown_default_engine() deletes it,
// at the latest from the exit handler default_engine() registers.
Engine* default_instance = nullptr;
bool default_shut_down = false;

void shutdown_default_engine_at_exit() noexcept {
  try {
    // The application finalized MPI itself with the engine still running (it
    // should have called shutdown_default_engine() first): a shutdown would
    // talk MPI again, so the engine is left as it is.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    shutdown_default_engine();
  } catch (...) {
    // Exiting anyway; an exception here would end in std::terminate.
  }
}
}  // namespace

Engine& default_engine() {
  std::lock_guard lock(default_mutex);
  if (default_shut_down) {
    throw Error(ErrorCode::Shutdown, -1, "default_engine: the engine was shut down");
  }
  if (!default_instance) {
    auto engine = std::make_unique<Engine>(Communicator::world());
    // When concord initialised MPI, Communicator::world() has registered
    // MPI_Finalize to run at exit by now; exit handlers run in reverse order, so
    // this one shuts the engine down before MPI is finalized.
    static const bool registered = std::atexit(shutdown_default_engine_at_exit) == 0;
    (void)registered;
    default_instance = engine.release();
  }
  return *default_instance;
}

void shutdown_default_engine() {
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard lock(default_mutex);
    default_shut_down = true;
    if (default_instance == nullptr) return;
    if (default_instance->core_->on_engine_thread()) {
      // From one of its completion callbacks: it cannot join (or delete) itself.
      // Stop it now; the next call from another thread (at the latest the exit
      // handler) joins and deletes it.
      default_instance->core_->shutdown();
      return;
    }
    engine.reset(std::exchange(default_instance, nullptr));
  }
  engine.reset();  // shutdown() and join, outside the lock
}

void Handle::wait() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::wait on an empty handle");
  std::unique_lock lock(work_->mutex);
  work_->cv.wait(lock, [&] { return work_->complete; });
  if (work_->error) throw *work_->error;
}

bool Handle::test() const {
  if (!work_) return false;
  std::lock_guard lock(work_->mutex);
  return work_->complete;
}

namespace {
// Waits until the work's results are set (also from inside its own completion
// callback, which runs before the handle reports completion).
void wait_results(detail::Work& work) {
  std::unique_lock lock(work.mutex);
  work.cv.wait(lock, [&] { return work.results_ready; });
  if (work.error) throw *work.error;
}
}  // namespace

const std::vector<std::byte>& Handle::output() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::output on an empty handle");
  wait_results(*work_);
  return work_->output;
}

const std::vector<std::size_t>& Handle::first_dims() const {
  if (!work_) throw Error(ErrorCode::InvalidArgument, -1, "Handle::first_dims on an empty handle");
  wait_results(*work_);
  return work_->first_dims;
}

}  // namespace concord

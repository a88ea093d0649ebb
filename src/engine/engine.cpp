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

#include <cstring>

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
  thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
}

EngineCore::~EngineCore() {
  shutdown();
}

void EngineCore::shutdown() {
  stop_requested_ = true;
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
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
      in_flight_.insert(w->name);
      w->enqueued = Clock::now();
      queue_.push_back(w);
      handles.push_back(Handle(w));
    }
  }
  return handles;
}

void EngineCore::complete(const std::shared_ptr<Work>& work, std::optional<Error> error) {
  {
    std::lock_guard lock(mutex_);
    in_flight_.erase(work->name);
  }
  work->finish(std::move(error));
}

void EngineCore::loop(std::stop_token) {
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
    Negotiator::Outcome out;
    try {
      // Peers may already be gone when we shut down: do not wait for ever.
      out = negotiator.cycle(std::move(fresh), stopping, stopping ? 10.0 : 0.0);
    } catch (const Error& e) {
      fmt::print(stderr, "{}\nconcord: engine stops\n", e.what());
      out.shutdown = true;
    }
    for (auto& [w, error] : out.failed) complete(w, error);
    if (!out.ready.empty()) execute(out.ready, Clock::now());
    if (out.shutdown) break;
    std::unique_lock lock(mutex_);
    wake_.wait_until(lock, start + cycle, [&] { return stop_requested_.load(); });
  }

  std::vector<std::shared_ptr<Work>> left = negotiator.take_pending();
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    left.insert(left.end(), queue_.begin(), queue_.end());
    queue_.clear();
  }
  for (auto& w : left) {
    complete(w, Error(ErrorCode::Shutdown, data_.rank(),
                      fmt::format("Engine: tensor '{}': the engine shut down first", w->name)));
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
    } catch (const Error& e) {
      complete(w, e);
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
  const int ranks = data_.size();
  if (!zero_copy_) zero_copy_ = segments_supported(data_, algorithm_);  // same on every rank
  if (*zero_copy_) {
    run_buckets_in_place(buckets, agreed);
    return;
  }
  AllreduceOptions options;
  options.algorithm = algorithm_;

  // A bucket of one tensor is reduced where it lies; larger ones go through a
  // buffer, packed on the packer thread while this thread reduces the previous
  // bucket, and unpacked there while this thread reduces the next.
  auto single = [](const Bucket& b) { return b.works.size() == 1; };
  // Buffers are sized before the pipeline starts: both threads use them.
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const std::size_t bytes = buckets[k].count * size_of(buckets[k].dtype);
    if (!single(buckets[k]) && buffers_[k % 2].size() < bytes) buffers_[k % 2].resize(bytes);
  }
  auto buffer_for = [&](std::size_t k) -> std::byte* {
    const Bucket& b = buckets[k];
    if (single(b)) return static_cast<std::byte*>(b.works[0]->tensor.data);
    return buffers_[k % 2].data();
  };
  auto prepare = [&](std::size_t k) {
    return packer_.submit([&, k] {
      const Bucket& b = buckets[k];
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
    });
  };

  std::vector<std::future<void>> finished;
  std::future<void> packed = prepare(0);
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const Bucket& b = buckets[k];
    std::byte* buf = buffer_for(k);
    packed.wait();
    // Bucket k+1 goes to the other buffer, which unpack(k-1) has freed
    // (the packer runs tasks in order).
    if (k + 1 < buckets.size()) packed = prepare(k + 1);
    std::optional<Error> error;
    const auto begin = Clock::now();
    try {
      concord::allreduce(buf, buf, b.count, b.dtype, b.op, data_, options);
    } catch (const Error& e) {
      error = e;
    }
    const auto end = Clock::now();
    finished.push_back(packer_.submit([&, k, buf, error, begin, end] {
      const Bucket& bk = buckets[k];
      const auto unpack_begin = Clock::now();
      if (!error) {
        if (single(bk)) {
          const Work& w = *bk.works[0];
          const double factor = output_scale(w.sig, ranks);
          if (factor != 1.0) scale(w.tensor.data, w.tensor.count, bk.dtype, factor);
        } else {
          unpack(bk, buf, ranks);
        }
      }
      const auto unpack_end = Clock::now();
      for (const auto& w : bk.works) {
        if (timeline_) {
          timeline_->span(w->name, "REDUCE", begin, end,
                          fmt::format("bucket of {} tensors, {} bytes", bk.works.size(),
                                      bk.count * size_of(bk.dtype)));
          timeline_->span(w->name, "UNPACK", unpack_begin, unpack_end);
        }
        complete(w, error);
      }
    }));
  }
  for (auto& f : finished) f.wait();
}

// Runs `reduce` for a bucket reduced in one piece, then records QUEUE and REDUCE
// spans and completes its tensors with the outcome.
void EngineCore::reduce_bucket(const Bucket& b, Clock::time_point agreed, const char* how,
                               const std::function<void()>& reduce) {
  const auto begin = Clock::now();
  std::optional<Error> error;
  try {
    reduce();
  } catch (const Error& e) {
    error = e;
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
  const std::size_t row_bytes = w.sig.count * size_of(w.sig.dtype);
  std::vector<std::size_t> block_bytes(ranks);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    block_bytes[r] = dims[r] * row_bytes;
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
std::unique_ptr<Engine> default_instance;
bool default_shut_down = false;
}  // namespace

Engine& default_engine() {
  std::lock_guard lock(default_mutex);
  if (default_shut_down) {
    throw Error(ErrorCode::Shutdown, -1, "default_engine: the engine was shut down");
  }
  if (!default_instance) default_instance = std::make_unique<Engine>(Communicator::world());
  return *default_instance;
}

void shutdown_default_engine() {
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard lock(default_mutex);
    default_shut_down = true;
    engine = std::move(default_instance);
  }
  if (engine) engine->shutdown();
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

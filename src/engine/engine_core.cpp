// The engine's life and loop: set-up, submit, the negotiation cycles, running
// what the ranks agreed (allreduces in buckets, buckets.cpp; the other
// collectives, engine_collectives.cpp) and shutdown.
#include "engine/engine_core.hpp"

#include "core/agreement.hpp"
#include "core/communicator_state.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"
#include "core/validate.hpp"
#include "device/device_path.hpp"
#include "dispatch/call_agreement.hpp"
#include "dispatch/dispatch.hpp"
#include "engine/device_buckets.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>

#include <cstdint>
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

// 0 turns the rule off: no tensor is that large.
std::size_t in_place_limit(std::size_t bytes) {
  return bytes == 0 ? SIZE_MAX : bytes;
}

void require_thread_multiple(int rank) {
  ensure_not_finalized("concord::Engine");
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread", rank);
  if (level < MPI_THREAD_MULTIPLE) {
    throw Error(ErrorCode::InvalidArgument, rank,
                "Engine: MPI was initialised without MPI_THREAD_MULTIPLE; the engine talks MPI "
                "from its own thread. Initialise with MPI_Init_thread(MPI_THREAD_MULTIPLE), or "
                "let concord initialise MPI");
  }
}

// EngineOptions::cycle_time_ms as CONCORD_CYCLE_TIME_MS allows it: 0 (cycles
// back to back) to kMaxCycleTimeMs.
double checked_cycle_time_ms(double ms, int rank) {
  if (!(ms >= 0 && ms <= kMaxCycleTimeMs)) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("Engine: EngineOptions::cycle_time_ms is {}; it must be 0 to {} "
                            "(milliseconds)",
                            ms, kMaxCycleTimeMs));
  }
  return ms;
}

// EngineOptions::stall_warning_s and stall_timeout_s as CONCORD_STALL_WARNING_S and
// CONCORD_STALL_TIMEOUT_S allow them: 0 to kMaxTimeoutS seconds (a timeout of 0: none).
StallPolicy checked_stall_policy(const EngineOptions& options, int rank) {
  const StallPolicy policy{options.stall_warning_s.value_or(config().stall_warning_s),
                           options.stall_timeout_s.value_or(config().stall_timeout_s)};
  const std::pair<const char*, double> limits[] = {{"stall_warning_s", policy.warning_s},
                                                   {"stall_timeout_s", policy.timeout_s}};
  for (const auto& [name, seconds] : limits) {
    if (!(seconds >= 0 && seconds <= kMaxTimeoutS)) {
      throw Error(ErrorCode::InvalidArgument, rank,
                  fmt::format("Engine: EngineOptions::{} is {}; it must be 0 to {} (seconds)", name,
                              seconds, kMaxTimeoutS));
    }
  }
  return policy;
}

// EngineOptions::algorithm, checked here: a value out of the enum would fail every
// fused allreduce later, on the engine's thread.
Algorithm checked_algorithm(Algorithm algorithm, int rank) {
  if (!known(algorithm)) {
    throw Error(ErrorCode::InvalidArgument, rank,
                fmt::format("Engine: EngineOptions::algorithm has the unknown Algorithm value {}",
                            static_cast<int>(algorithm)));
  }
  return algorithm;
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
      fusion_threshold_(options.fusion_threshold.value_or(
          config().fusion_threshold.value_or(default_fusion_threshold(comm.num_nodes())))),
      fusion_in_place_bytes_(in_place_limit(options.fusion_in_place_bytes.value_or(
          config().fusion_in_place_bytes.value_or(default_fusion_in_place_bytes())))),
      cycle_time_ms_(checked_cycle_time_ms(options.cycle_time_ms.value_or(config().cycle_time_ms),
                                           comm.rank())),
      stall_{checked_stall_policy(options, comm.rank())},
      algorithm_(checked_algorithm(options.algorithm, comm.rank())) {
  open_timeline(options.timeline_path.value_or(config().timeline_path));
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

// Collective over control_, before the engine thread starts: the communicators
// were made together, so a rank that fails alone here would leave its peers'
// engines waiting for it in their negotiation until the transport's deadline,
// blaming a dead peer. The ranks agree on it, and every one fails.
void EngineCore::open_timeline(const std::string& path) {
  const int rank = data_.rank();
  std::optional<Error> failed;
  if (!path.empty() && rank == 0) {
    try {
      timeline_ = std::make_unique<Timeline>(path, 0);
    } catch (const Error& e) {
      failed = e;
    }
  }
  const SetupWait wait{"the engine's construction", &control_.state().abort_signal,
                       "the engine is not made"};
  const bool everywhere = all_ranks_ok(control_.mpi_comm(), !failed, rank, wait);
  if (failed) throw *failed;  // it names the file
  if (!everywhere) {
    throw Error(ErrorCode::SystemError, rank,
                "Engine: rank 0 could not open its timeline file (CONCORD_TIMELINE or "
                "EngineOptions::timeline_path; its error names the file); the engine is not "
                "made, on any rank");
  }
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

void EngineCore::abort() noexcept {
  data_.abort();
  control_.abort();
  // Without the mutex (abort takes no lock): if the engine thread is between
  // its check of the flag and its sleep, it misses this wakeup and sleeps out
  // its cycle, then finds the abort when its next negotiation starts.
  stop_requested_ = true;
  wake_.notify_all();
}

std::vector<Handle> EngineCore::submit(std::vector<std::shared_ptr<Work>> works, bool whole_group) {
  for (const auto& w : works) validate(*w);
  for (const auto& w : works) {
    if (w->tensor.device == Device::Cuda && w->tensor.count > 0) {
      w->ready = record_ready_event(w->tensor.data, w->tensor.stream);
    }
  }
  std::vector<Handle> handles;
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    if (stop_error_) throw *stop_error_;  // why it stopped, not just that it did
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
      w->in_whole_group = whole_group;
      queue_.push_back(w);
      handles.push_back(Handle(w));
    }
    start_now_ = start_now_ || (whole_group && !works.empty());
    wake = whole_group || idle_;
  }
  if (wake) wake_.notify_all();
  return handles;
}

void EngineCore::complete(const std::shared_ptr<Work>& work, std::optional<Error> error) {
  if (work->claimed.exchange(true)) return;  // completed already
  if (!work->filler) {
    std::lock_guard lock(mutex_);
    in_flight_.erase(work->name);
  }
  work->finish(std::move(error));
}

void EngineCore::loop() {
  std::optional<Error> failure;
  try {
    cycles();
  } catch (...) {
    // The negotiator could not be made, or a cycle failed (a peer timed out:
    // ErrorCode::Timeout): the ranks no longer agree, so this engine stops (its
    // peers stop on their next cycle with it, or time out on it themselves).
    // After Engine::abort the stop was asked for: nothing to report.
    if (!control_.aborted()) report_stop(std::current_exception(), data_.rank());
    try {
      failure = to_error(std::current_exception(), data_.rank(), "Engine");
    } catch (...) {
      failure.reset();  // no memory for the message: the handles say "shut down" below
    }
  }
  // Fail what is left: whatever was submitted and has not completed. After a
  // failure every handle, and every later submit, gets the failure's code and
  // message, so the application learns why (a dead peer) and not just "stopped".
  std::vector<std::shared_ptr<Work>> left;
  {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    stop_error_ = failure;
    queue_.clear();
    left.reserve(in_flight_.size());
    for (const auto& [name, w] : in_flight_) left.push_back(w);
  }
  for (auto& w : left) {
    // Every handle must complete, even if formatting its message fails.
    std::optional<Error> error;
    try {
      if (failure) {
        error.emplace(*failure);
      } else {
        error.emplace(ErrorCode::Shutdown, data_.rank(),
                      fmt::format("Engine: tensor '{}': the engine shut down first", w->name));
      }
    } catch (...) {
      error.emplace(ErrorCode::Shutdown, data_.rank(), "Engine: the engine shut down first");
    }
    complete(w, std::move(error));
  }
}

void EngineCore::cycles() {
  // A live peer may sleep out an idle cycle, and then wait for the next tick of
  // the cycle grid, before it answers (wait_for_next_cycle).
  const double longest_sleep_s =
      std::max(cycle_time_ms_ / 1000, std::chrono::duration<double>(kIdleCycle).count()) +
      cycle_time_ms_ / 1000;
  Negotiator negotiator(control_.mpi_comm(), control_.rank(), control_.size(), stall_,
                        config().transport_timeout_s, longest_sleep_s,
                        control_.state().abort_signal);
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(cycle_time_ms_));
  // Tensors of whole groups given to the negotiator and not yet agreed (engine
  // thread only). While there are any, for one cycle time after the last group
  // arrived, the next cycle starts at once: a peer whose timer cycle met this
  // rank's group before its own submit is then answered as soon as it submits.
  // Past that window the usual pace resumes, so a group that cannot complete (a
  // peer that is far behind, or groups that differ between ranks) costs no more
  // polling than the cycles did before.
  std::size_t group_tensors_waiting = 0;
  Clock::time_point hurry_until{};
  for (;;) {
    const auto start = Clock::now();
    std::vector<std::shared_ptr<Work>> fresh;
    {
      std::lock_guard lock(mutex_);
      fresh.swap(queue_);
      start_now_ = false;
    }
    for (const auto& w : fresh) {
      if (!w->in_whole_group) continue;
      ++group_tensors_waiting;
      hurry_until = start + cycle;
    }
    const bool stopping = stop_requested_;
    // Peers may already be gone when we shut down: do not wait for ever. An
    // exception here ends the cycles (loop() fails the pending handles).
    Negotiator::Outcome out = negotiator.cycle(std::move(fresh), stopping, stopping ? 10.0 : 0.0);
    // The ranks left the exchange together (within a poll), so the next cycle
    // is timed from here, not from `start`: timed from each rank's own start,
    // the ranks' timers keep whatever offset they have, and the rank ahead then
    // polls out that offset in every exchange (half a core, idle, at 1 ms).
    const auto met = Clock::now();
    for (const auto& w : out.ready) group_tensors_waiting -= w->in_whole_group ? 1 : 0;
    for (const auto& [w, error] : out.failed) group_tensors_waiting -= w->in_whole_group ? 1 : 0;
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
    if (group_tensors_waiting > 0 && Clock::now() < hurry_until) continue;
    wait_for_next_cycle(met, cycle);
  }
}

void EngineCore::wait_for_next_cycle(Clock::time_point met, Clock::duration cycle) {
  std::unique_lock lock(mutex_);
  const auto woken = [&] { return stop_requested_.load() || start_now_; };
  if (!in_flight_.empty() || woken()) {
    wake_.wait_until(lock, met + cycle, woken);
    return;
  }
  // Nothing of this rank's is in flight, so no collective anywhere can run
  // before it submits one: its cycles only answer the peers' (their shutdown,
  // rank 0's stall reports), which bear an idle pace. At the cycle time each
  // idle cycle's exchange (MPI's progress yields the core in every poll) took a
  // fifth to a half of the core that the application computes on. The first
  // submission wakes it; a lone tensor then waits for the next tick of the
  // usual cycle grid (kept from `met`, the same on every rank) to meet others.
  idle_ = true;
  wake_.wait_until(lock, met + std::max<Clock::duration>(cycle, kIdleCycle),
                   [&] { return woken() || !queue_.empty(); });
  idle_ = false;
  // A cycle time of 0 (allowed: cycles back to back) has no grid to wait for.
  if (woken() || queue_.empty() || cycle <= Clock::duration::zero()) return;
  const auto ticks = (Clock::now() - met) / cycle + 1;
  wake_.wait_until(lock, met + ticks * cycle, woken);
}

void EngineCore::fail_if_out_of_step(const Error& error) {
  // This rank may have skipped a collective its peers run (an allocation or a
  // device copy failed between two of them), and its later collectives would then
  // meet their messages out of order. The engine's communicator fails (the first
  // reason stays): every later collective of this engine fails at once here, and
  // the peers' at their deadline or their own failure.
  if (may_leave_ranks_out_of_step(error)) fail_communicator(data_, error);
}

void EngineCore::execute(const std::vector<std::shared_ptr<Work>>& ready,
                         Clock::time_point agreed) {
  if (timeline_) {
    for (const auto& w : ready) timeline_->span(w->name, "NEGOTIATE", w->enqueued, agreed);
  }
  // Allreduces run in fused buckets; any other collective closes the run
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
      run_one(*w);
    } catch (...) {
      const Error error = to_error(std::current_exception(), data_.rank(),
                                   fmt::format("Engine: tensor '{}'", w->name));
      fail_if_out_of_step(error);
      complete(w, error);
      continue;
    }
    if (timeline_ && w->sig.kind != WorkKind::Join) {
      timeline_->span(w->name, phase_name(w->sig.kind), begin, Clock::now());
    }
    complete(w, std::nullopt);
  }
  run_buckets(run, agreed);
}

}  // namespace detail

}  // namespace concord

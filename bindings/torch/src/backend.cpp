// The backend's life, how a collective is launched and completed, and the
// in-place collectives (allreduce, broadcast, barrier). The gathering ones are
// in backend_gather.cpp.
#include "backend.hpp"

#include "errors.hpp"
#include "group_comm.hpp"
#include "tensors.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <utility>

namespace concord_torch {

namespace {

// A name window of 256 per kind: far more than DDP keeps in flight (one per
// bucket), and at most a few thousand names in the engine's cache.
constexpr std::size_t kNameWindow = 256;

concord::EngineOptions engine_options(double timeout_s) {
  concord::EngineOptions options;
  if (timeout_s > 0) options.stall_timeout_s = timeout_s;
  return options;
}

// What the steps of one launch share until the last of them completes. The
// engine keeps each step's completion (which holds this state) for as long as a
// Handle of it lives (CollectiveNames keeps some), so the completer takes the
// Work, the steps and the handles out of it: what they hold (the tensors) is
// released when the collective completes, not when the engine forgets it.
struct LaunchState {
  LaunchState(c10::intrusive_ptr<ConcordWork> w, std::vector<Step> s, InFlight* f, Completer* c,
              bool after)
      : remaining(static_cast<int>(s.size())),
        handles(s.size()),
        work(std::move(w)),
        steps(std::move(s)),
        in_flight(f),
        completer(c),
        launch(f->add()),
        after_earlier(after) {}
  std::atomic<int> remaining;
  std::mutex mutex;
  std::exception_ptr error;  // the first
  std::vector<std::vector<concord::Handle>> handles;
  std::promise<void> enqueued;
  c10::intrusive_ptr<ConcordWork> work;
  std::vector<Step> steps;
  InFlight* in_flight;   // the backend's, which outlives its completer's tasks
  Completer* completer;  // the backend's
  std::uint64_t launch;  // its number in in_flight
  bool after_earlier;    // a barrier: its Work completes after the earlier launches'
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!error) error = std::move(e);
  }
};

// The launch's Work, then its number off InFlight: its results are in place and
// its Work is complete, so a direct call may run now. Then the Future, whose
// callbacks may wait for one.
void complete_launch(const c10::intrusive_ptr<ConcordWork>& work, const std::exception_ptr& error,
                     InFlight* in_flight, std::uint64_t launch) {
  work->complete_work(error);
  in_flight->done(launch);
  work->complete_future(error);
}

// On the completer: the results into the outputs, then the Work and its Future.
void finish_launch(const std::shared_ptr<LaunchState>& state) {
  state->enqueued.get_future().wait();
  auto work = std::move(state->work);
  auto steps = std::move(state->steps);
  auto handles = std::move(state->handles);
  std::exception_ptr error = state->error;
  if (!error) {
    try {
      for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps[i].after) steps[i].after(handles[i]);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!state->after_earlier) {
    complete_launch(work, error, state->in_flight, state->launch);
    return;
  }
  // A barrier: the earlier launches' completions may be running on the
  // completer's other threads still. Once they are done it comes back to the
  // completer, so no thread of it waits meanwhile for tasks queued behind it.
  Completer* completer = state->completer;
  InFlight* in_flight = state->in_flight;
  const std::uint64_t launch = state->launch;
  in_flight->after_earlier(
      launch, [=] { completer->post([=] { complete_launch(work, error, in_flight, launch); }); });
}

}  // namespace

ConcordBackend::ConcordBackend(int rank, int size, const std::vector<int64_t>& world_ranks,
                               std::chrono::milliseconds timeout, const std::string& group_name)
    : c10d::Backend(rank, size),
      timeout_(timeout),
      group_name_(group_name),
      names_(group_name, kNameWindow) {
  try {
    const concord::Communicator comm =
        group_communicator(rank, size, world_ranks, group_name_, timeout_s());
    engine_ = std::make_unique<concord::Engine>(comm, engine_options(timeout_s()));
    direct_ = direct_communicator(comm);
  } catch (const concord::Error& e) {
    throw_torch_error(e);
  }
}

ConcordBackend::~ConcordBackend() {
  shutdown();
}

void ConcordBackend::shutdown() {
  try {
    lane_.stop();  // before the engine: cancelled calls complete through the completer
  } catch (...) {
    // A lane's stop throws only where its mutex does (system_error): go on.
  }
  try {
    if (engine_) engine_->shutdown();
  } catch (...) {
    // Shutdown gives up on gone peers itself; nothing more to do at exit.
  }
  // The engine has completed every collective by now; their completions finish
  // here, before the caller goes on (to interpreter exit, perhaps).
  completer_.drain();
}

void ConcordBackend::abort() {
  // From this thread, while the lane's may be inside a call: the flags only.
  if (direct_) direct_->abort();
  if (engine_) engine_->abort();
  shutdown();
}

concord::Engine& ConcordBackend::engine(const char* call) {
  TORCH_CHECK(engine_ != nullptr, "concord: ", call, ": the process group was shut down");
  return *engine_;
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::launch(c10d::OpType type, const char* title,
                                                      std::vector<at::Tensor> outputs,
                                                      std::vector<Step> steps) {
  auto work = c10::make_intrusive<ConcordWork>(rank_, type, title, std::move(outputs));
  if (steps.empty()) {  // nothing to exchange (an empty list of tensors)
    work->complete(nullptr);
    return work;
  }
  const std::size_t count = steps.size();
  // A barrier completes after every earlier call of the group, as gloo's does.
  auto state = std::make_shared<LaunchState>(work, std::move(steps), &in_flight_, &completer_,
                                             type == c10d::OpType::BARRIER);
  Completer* completer = &completer_;
  auto finish = [completer, state] { completer->post([state] { finish_launch(state); }); };
  // Step i could not be enqueued: the Work fails with `error` once the steps
  // before it complete.
  auto give_up = [&](std::exception_ptr error, std::size_t i) {
    state->fail(std::move(error));
    if ((state->remaining -= static_cast<int>(count - i)) == 0) finish();
  };
  for (std::size_t i = 0; i < count; ++i) {
    concord::Completion done = [state, finish](const concord::Error* e) {
      if (e != nullptr) state->fail(work_error(*e));
      if (--state->remaining == 0) finish();
    };
    Step& step = state->steps[i];
    try {
      state->handles[i] = step.enqueue(step.names, std::move(done));
      for (std::size_t n = 0; n < step.names.size(); ++n) {
        names_.in_flight(step.names[n], state->handles[i][n]);
      }
    } catch (const concord::Error& e) {
      if (i == 0) {  // nothing in flight yet: raise at once
        in_flight_.done(state->launch);
        throw_torch_error(e);
      }
      give_up(work_error(e), i);
      break;
    } catch (...) {
      if (i == 0) {
        in_flight_.done(state->launch);
        throw;
      }
      give_up(std::current_exception(), i);
      break;
    }
  }
  state->enqueued.set_value();
  return work;
}

Step ConcordBackend::allreduce_step(std::vector<at::Tensor> tensors, const c10d::ReduceOp& op,
                                    const char* call, const char* kind) {
  check_tensors(tensors, call, "tensors");
  const ReduceSpec spec = reduce_op_of(op, tensors.at(0).scalar_type(), call);
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == tensors[0].scalar_type(), "concord: ", call,
                     ": the tensors have dtypes ", tensors[0].scalar_type(), " and ",
                     t.scalar_type(), "; one call reduces one dtype");
    TORCH_CHECK_VALUE(!is_cuda(t) || t.is_contiguous(), "concord: ", call,
                      ": CUDA tensors must be contiguous");
    reduce_dtype(t.scalar_type(), call);
  }
  // Every check before the names: a rank that raises takes none, so its
  // names stay in step with the other ranks'.
  std::vector<Staged> staged;
  std::vector<concord::TensorView> views;
  for (const at::Tensor& t : tensors) {
    staged.push_back(stage_premultiplied(t, spec));  // the tensors are the outputs
    views.push_back(reduce_view(staged.back().dense, call));
  }
  Step step;
  step.names = names_.next(kind, tensors.size());
  concord::Engine* engine = &this->engine(call);
  // Always as a group, even of one: the engine then starts a cycle for it at
  // once, where a single enqueue waits for the next timer cycle (up to
  // CONCORD_CYCLE_TIME_MS) to gather others: a c10d call is complete as it comes
  // (a DDP bucket is already fused), and its caller usually waits on it.
  step.enqueue = [engine, views, spec](const std::vector<std::string>& names,
                                       concord::Completion done) {
    return engine->enqueue_grouped_allreduce(names, views, spec.op, 1.0, 1.0, done);
  };
  step.after = [staged](const std::vector<concord::Handle>&) {
    for (const Staged& s : staged) s.copy_back();
  };
  return step;
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "concord: allreduce takes one tensor per rank, not ",
                    tensors.size());
  if (const std::optional<ReduceSpec> spec = direct_path_op(tensors, opts)) {
    return allreduce_direct(tensors[0], *spec, opts.asyncOp);
  }
  std::vector<Step> steps;
  steps.push_back(allreduce_step(tensors, opts.reduceOp, "allreduce"));
  return launch(c10d::OpType::ALLREDUCE, "concord:all_reduce", tensors, std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "concord: allreduce_coalesced: no tensors");
  std::vector<Step> steps;
  steps.push_back(allreduce_step(tensors, opts.reduceOp, "allreduce_coalesced"));
  return launch(c10d::OpType::ALLREDUCE_COALESCED, "concord:all_reduce_coalesced", tensors,
                std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                         const c10d::BroadcastOptions& opts) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "concord: broadcast takes one tensor per rank, not ",
                    tensors.size());
  check_tensors(tensors, "broadcast", "tensors");
  TORCH_CHECK_VALUE(!is_cuda(tensors[0]) || tensors[0].is_contiguous(),
                    "concord: broadcast: CUDA tensors must be contiguous");
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "concord: broadcast: root ",
                    opts.rootRank, " is not a rank of this group of ", size_);
  const Staged staged = stage(tensors[0]);
  const concord::TensorView view = wire_view(staged.dense);
  concord::Engine* engine = &this->engine("broadcast");
  const int root = static_cast<int>(opts.rootRank);
  Step step;
  step.names = names_.next("broadcast", 1);
  step.enqueue = [engine, view, root](const std::vector<std::string>& names,
                                      concord::Completion done) {
    return std::vector<concord::Handle>{engine->enqueue_broadcast(names[0], view, root, done)};
  };
  step.after = [staged](const std::vector<concord::Handle>&) { staged.copy_back(); };
  std::vector<Step> steps;
  steps.push_back(std::move(step));
  return launch(c10d::OpType::BROADCAST, "concord:broadcast", tensors, std::move(steps));
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::barrier(const c10d::BarrierOptions&) {
  // An allreduce of one int32 that every rank must reach: on the direct path,
  // after every earlier call of the group, as gloo's barrier is after its work.
  if (has_direct_path()) return barrier_direct();
  std::vector<at::Tensor> token{at::zeros({1}, at::kInt)};
  std::vector<Step> steps;
  steps.push_back(allreduce_step(token, c10d::ReduceOp::SUM, "barrier", "barrier"));
  return launch(c10d::OpType::BARRIER, "concord:barrier", {}, std::move(steps));
}

}  // namespace concord_torch

// The direct path (on by default; CONCORD_TORCH_DIRECT=0 turns it off): a CPU
// allreduce, and the barrier, as a checked concord::allreduce
// (AllreduceOptions::agreement_timeout_s) on the backend's own communicator, in
// the order the calls were made (lane.hpp). A synchronous one runs on the
// calling thread: no hand-off to the engine's thread nor back through the
// completer, which at 2 ranks on one core each cost more than the allreduce of
// a small tensor (docs/PERFORMANCE.md, "PyTorch"). An asynchronous one runs on
// the lane's thread and completes through the completer, as the engine's do.
#include "backend.hpp"
#include "errors.hpp"
#include "group_comm.hpp"
#include "tensors.hpp"

#include <concord/allreduce.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace concord_torch {

std::uint64_t InFlight::add() {
  std::lock_guard<std::mutex> lock(mutex);
  open.insert(++launched);
  return launched;
}

void InFlight::done(std::uint64_t launch) {
  std::vector<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mutex);
    open.erase(launch);
    // A waiting launch is open itself: ready once it is the first still open.
    while (!waiting.empty() && (open.empty() || waiting.begin()->first <= *open.begin())) {
      ready.push_back(std::move(waiting.begin()->second));
      waiting.erase(waiting.begin());
    }
  }
  changed.notify_all();
  for (const auto& then : ready) then();
}

void InFlight::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [this] { return open.empty(); });
}

void InFlight::after_earlier(std::uint64_t launch, std::function<void()> then) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!open.empty() && *open.begin() < launch) {
      waiting.emplace(launch, std::move(then));
      return;
    }
  }
  then();
}

namespace {

// CONCORD_TORCH_DIRECT on this rank: 0, 1 (also where unset), or -1 where it
// is neither.
int direct_setting() {
  const char* v = std::getenv("CONCORD_TORCH_DIRECT");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "1") return 1;
  return std::string_view(v) == "0" ? 0 : -1;
}

// Collective over `group`: whether every rank asks for the direct path. A value
// that is not 0 or 1 on some rank, or ranks that differ, fail on every rank (a
// rank alone without the direct communicator would hang the others' set-up).
bool direct_path_requested(const concord::Communicator& group) {
  const int mine = direct_setting();
  std::int32_t least[2] = {mine, -mine};  // the least value, and minus the greatest
  // concord's allreduce, not a blocking MPI_Allreduce: a rank that never comes
  // fails the others at CONCORD_TRANSPORT_TIMEOUT_S, naming it, and an abort ends it.
  // Over MPI (recursive doubling): on the group's first call, the automatic
  // choice would set up the node's shared memory for this throw-away communicator.
  concord::AllreduceOptions options;
  options.device = concord::Device::Cpu;
  options.algorithm = concord::Algorithm::RecursiveDoubling;
  concord::allreduce(least, least, 2, concord::DataType::Int32, concord::ReduceOp::Min, group,
                     options);
  const int lowest = least[0];
  const int highest = -least[1];
  if (lowest == -1 || highest != lowest) {
    throw concord::Error(
        concord::ErrorCode::InvalidArgument, group.rank(),
        lowest == -1 ? "CONCORD_TORCH_DIRECT: some rank's value is neither 0 nor 1"
                     : "CONCORD_TORCH_DIRECT is 0 on some ranks of the group and not on others; "
                       "set it the same on every rank");
  }
  return lowest == 1;
}

}  // namespace

std::optional<concord::Communicator> direct_communicator(const concord::Communicator& group) {
  if (group.size() < 2 || !direct_path_requested(group) || group.num_nodes() != 1) {
    return std::nullopt;
  }
  concord::Communicator direct(group.mpi_comm());  // duplicates it
  float token = 0;
  concord::allreduce(&token, &token, 1, concord::DataType::Float32, concord::ReduceOp::Sum, direct);
  return direct;
}

std::optional<ReduceSpec> ConcordBackend::direct_path_op(const std::vector<at::Tensor>& tensors,
                                                         const c10d::AllreduceOptions& opts) {
  // Only what is the same on every rank decides: the group, the tensor's device
  // and its dtype's op, not async_op (DDP's Join shadows the others'
  // asynchronous allreduces with synchronous ones). A rank taking the engine
  // while another goes direct would fail both after the timeout, naming each
  // other. And a timeout: without one the checked call would have no deadline.
  if (!has_direct_path() || tensors.size() != 1 || is_cuda(tensors[0])) {
    return std::nullopt;
  }
  check_tensors(tensors, "allreduce", "tensors");
  // PREMUL_SUM too: its factor, which may differ between ranks, is applied to
  // this rank's tensor before a plain Sum (ReduceSpec).
  return reduce_op_of(opts.reduceOp, tensors[0].scalar_type(), "allreduce");  // raises for bad ones
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allreduce_direct(at::Tensor& tensor,
                                                                const ReduceSpec& spec,
                                                                bool async) {
  const Staged staged = stage_premultiplied(tensor, spec);  // the tensor is the output
  const concord::TensorView view = reduce_view(staged.dense, "allreduce");
  auto work = c10::make_intrusive<ConcordWork>(rank_, c10d::OpType::ALLREDUCE, "concord:all_reduce",
                                               std::vector<at::Tensor>{tensor});
  // The call's number names it, and its tensor (as DDP's bucket sizes do).
  const std::string label = "all_reduce #" + std::to_string(++direct_calls_) + " of group '" +
                            group_name_ + "' (" + std::string(c10::toString(tensor.scalar_type())) +
                            "[" + std::to_string(tensor.numel()) + "])";
  run_direct(work, "allreduce", async, !async, [staged, view, spec, label, this] {
    concord::allreduce(view.data, view.data, view.count, view.dtype, spec.op, *direct_,
                       checked(label));
    staged.copy_back();
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::barrier_direct() {
  auto work = c10::make_intrusive<ConcordWork>(rank_, c10d::OpType::BARRIER, "concord:barrier",
                                               std::vector<at::Tensor>{});
  const std::string label =
      "barrier #" + std::to_string(++direct_calls_) + " of group '" + group_name_ + "'";
  // After the engine's earlier collectives too, as gloo's barrier waits for all
  // earlier work.
  run_direct(work, "barrier", true, true, [label, this] {
    std::int32_t token = 0;
    concord::allreduce(&token, &token, 1, concord::DataType::Int32, concord::ReduceOp::Sum,
                       *direct_, checked(label));
  });
  return work;
}

concord::AllreduceOptions ConcordBackend::checked(const std::string& label) const {
  concord::AllreduceOptions options;
  options.device = concord::Device::Cpu;
  options.agreement_timeout_s = timeout_s();
  options.label = label;
  return options;
}

void ConcordBackend::run_direct(const c10::intrusive_ptr<ConcordWork>& work, const char* what,
                                bool async, bool after_engine, std::function<void()> call) {
  // An asynchronous allreduce, like any two asynchronous collectives, is not
  // ordered against the engine's; a synchronous one sees their results.
  auto task = [this, work, async, after_engine, call = std::move(call)] {
    if (after_engine) in_flight_.wait_idle();
    std::exception_ptr error;
    try {
      call();
    } catch (const concord::Error& e) {
      error = work_error(e);
    } catch (...) {
      error = std::current_exception();
    }
    if (async) {
      complete_async(work, error);
    } else {
      work->complete(error);
    }
  };
  // Where the group is destroyed before the call starts: it fails at once
  // instead of waiting for peers that, after an error, may never come.
  auto cancel = [this, work] {
    const concord::Error e(concord::ErrorCode::Shutdown, rank_,
                           "the process group was shut down before this call ran");
    complete_async(work, work_error(e));
  };
  const bool taken = async ? lane_.post(std::move(task), std::move(cancel)) : lane_.run_here(task);
  TORCH_CHECK(taken, "concord: ", what, ": the process group was shut down");
}

void ConcordBackend::complete_async(const c10::intrusive_ptr<ConcordWork>& work,
                                    std::exception_ptr error) {
  // The Work on this thread, so that the lane's Works complete in call order (a
  // barrier's after the allreduces before it). Its Future's callbacks (DDP's
  // hooks) may wait on a later call of this lane: they run on the completer,
  // never on the lane's thread.
  work->complete_work(error);
  completer_.post([work, error] { work->complete_future(error); });
}

}  // namespace concord_torch

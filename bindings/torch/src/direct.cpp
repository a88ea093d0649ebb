// The direct path (CONCORD_TORCH_DIRECT=1; off by default): a synchronous CPU
// allreduce on the calling thread, as a checked concord::allreduce
// (AllreduceOptions::agreement_timeout_s) on the backend's own communicator. No hand-off to the
// engine's thread nor back through the completer: at 2 ranks on one core each those switches cost
// more than the allreduce of a small tensor (docs/PERFORMANCE.md, "PyTorch").
#include "backend.hpp"
#include "errors.hpp"
#include "group_comm.hpp"
#include "tensors.hpp"

#include <concord/allreduce.hpp>

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace concord_torch {

void InFlight::add() {
  std::lock_guard<std::mutex> lock(mutex);
  ++count;
}

void InFlight::done() {
  std::lock_guard<std::mutex> lock(mutex);
  if (--count == 0) idle.notify_all();
}

void InFlight::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex);
  idle.wait(lock, [this] { return count == 0; });
}

namespace {

// CONCORD_TORCH_DIRECT on this rank: 0, 1, or -1 where it is neither.
int direct_setting() {
  const char* v = std::getenv("CONCORD_TORCH_DIRECT");
  if (v == nullptr || *v == '\0' || std::string_view(v) == "0") return 0;
  return std::string_view(v) == "1" ? 1 : -1;
}

// Collective over `group`: whether every rank asks for the direct path. A value
// that is not 0 or 1 on some rank, or ranks that differ, fail on every rank (a
// rank alone without the direct communicator would hang the others' set-up).
bool direct_path_requested(const concord::Communicator& group) {
  const int mine = direct_setting();
  const int in[2] = {mine, -mine};
  int out[2] = {0, 0};
  if (MPI_Allreduce(in, out, 2, MPI_INT, MPI_MIN, group.mpi_comm()) != MPI_SUCCESS) {
    throw concord::Error(concord::ErrorCode::MpiError, group.rank(),
                         "MPI_Allreduce failed agreeing on CONCORD_TORCH_DIRECT");
  }
  const int lowest = out[0];
  const int highest = -out[1];
  if (lowest == -1 || highest != lowest) {
    throw concord::Error(
        concord::ErrorCode::InvalidArgument, group.rank(),
        lowest == -1 ? "CONCORD_TORCH_DIRECT: some rank's value is neither 0 nor 1"
                     : "CONCORD_TORCH_DIRECT is 1 on some ranks of the group and not on others; "
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
  // Only what is the same on every rank decides: async_op, the group, the
  // tensor's device and its dtype's op (a rank taking the engine while another
  // goes direct would fail both after the timeout, naming each other).
  // And a timeout: without one the checked call would have no deadline.
  if (opts.asyncOp || !direct_ || timeout_.count() <= 0 || tensors.size() != 1 ||
      is_cuda(tensors[0])) {
    return std::nullopt;
  }
  check_tensors(tensors, "allreduce", "tensors");
  // PREMUL_SUM's factor may differ between ranks: decided by the op, not its value.
  if (opts.reduceOp == c10d::ReduceOp::PREMUL_SUM) return std::nullopt;
  return reduce_op_of(opts.reduceOp, tensors[0].scalar_type(), "allreduce");  // raises for bad ones
}

c10::intrusive_ptr<c10d::Work> ConcordBackend::allreduce_direct(at::Tensor& tensor,
                                                                const ReduceSpec& spec) {
  const Staged staged = stage(tensor);
  const concord::TensorView view = reduce_view(staged.dense, "allreduce");
  auto work = c10::make_intrusive<ConcordWork>(rank_, c10d::OpType::ALLREDUCE, "concord:all_reduce",
                                               std::vector<at::Tensor>{tensor});
  in_flight_.wait_idle();  // after the engine's earlier collectives of this group
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(direct_mutex_);
    const std::string label =
        "all_reduce #" + std::to_string(++direct_calls_) + " of group '" + group_name_ + "'";
    concord::AllreduceOptions options;
    options.device = concord::Device::Cpu;
    options.agreement_timeout_s = static_cast<double>(timeout_.count()) / 1e3;
    options.label = label;
    try {
      concord::allreduce(view.data, view.data, view.count, view.dtype, spec.op, *direct_, options);
      staged.copy_back();
    } catch (const concord::Error& e) {
      error = work_error(e);
    } catch (...) {
      error = std::current_exception();
    }
  }
  work->complete(error);
  return work;
}

}  // namespace concord_torch

// concord as a torch.distributed backend: a c10d::Backend whose collectives go
// through a concord::Engine on the group's own MPI communicator.
//
// In a group on one node, an allreduce of one CPU tensor and the barrier take
// the direct path (direct.cpp; CONCORD_TORCH_DIRECT=0 turns it off): a checked
// concord::allreduce in the order the calls were made, a synchronous one on the
// calling thread, an asynchronous one on the group's lane thread. c10d's calls
// come in the same order on every rank, so they need no negotiation, and the
// checked call's exchange keeps what the negotiation gives (a mismatch fails on
// every rank, a missing rank is named after the group's timeout). Every other
// collective (CUDA tensors, coalesced, gathering ones, groups across nodes) is
// enqueued on the engine and returns a ConcordWork at once; the engine runs it when every rank of
// the group has submitted it (fusing allreduces that are ready together), and the Work and its
// Future complete on the backend's completer thread (work.hpp). The group's
// timeout becomes the engine's stall timeout, so a rank that never submits a
// collective fails it on every rank with an error naming the collective and the
// ranks missing, instead of hanging.
#pragma once

#include "lane.hpp"
#include "names.hpp"
#include "tensors.hpp"
#include "work.hpp"

#include <concord/concord.hpp>

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace concord_torch {

// The engine collectives this backend launched and has not finished, by launch
// number: a direct call waits until there are none, so it runs after them as
// it was called; an engine barrier's Work completes once the ones launched
// before it are done, whose completions may run on the completer's other
// threads after the barrier's own has come.
struct InFlight {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t launched = 0;
  std::set<std::uint64_t> open;                            // launch numbers
  std::map<std::uint64_t, std::function<void()>> waiting;  // after_earlier's, by launch
  std::uint64_t add();                                     // the new launch's number
  void done(std::uint64_t launch);
  void wait_idle();
  // Runs `then` once every launch numbered below `launch` is done: here, or in
  // the done() that makes it so, on that caller's thread (so `then` only posts).
  void after_earlier(std::uint64_t launch, std::function<void()> then);
};

// One engine enqueue of a collective, and what to do with its results.
struct Step {
  std::vector<std::string> names;
  // Enqueues under `names` with `done` as the completion; returns the handles.
  std::function<std::vector<concord::Handle>(const std::vector<std::string>& names,
                                             concord::Completion done)>
      enqueue;
  // On success, on the completer thread: results into the output tensors.
  std::function<void(const std::vector<concord::Handle>&)> after;
};

class ConcordBackend final : public c10d::Backend {
 public:
  // `world_ranks`: the group's members as ranks of MPI_COMM_WORLD, in group
  // order (empty: the whole world). Collective over the group.
  ConcordBackend(int rank, int size, const std::vector<int64_t>& world_ranks,
                 std::chrono::milliseconds timeout, const std::string& group_name);
  ~ConcordBackend() override;

  const std::string getBackendName() const override { return "concord"; }
  bool supportsCoalescing() const override { return false; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // What concord does not implement: each raises NotImplementedError naming it.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // Stops the engine: pending collectives fail. Idempotent; the destructor and
  // the package's exit handler (before MPI is finalized) call it. A direct call
  // already running finishes first (it waits for its peers, at most the timeout).
  void shutdown() override;
  // c10d's abort (ProcessGroup.abort, distributed_c10d._abort_process_group),
  // for a rank that gives up on its peers: as shutdown, but a running direct
  // call stops waiting for them and fails now (concord::Communicator::abort),
  // so does a collective in the engine (concord::Engine::abort), and every later
  // call fails.
  void abort() override;

 private:
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* title,
                                        std::vector<at::Tensor> outputs, std::vector<Step> steps);
  // `kind` names the engine's collectives (names.hpp).
  Step allreduce_step(std::vector<at::Tensor> tensors, const c10d::ReduceOp& op, const char* call,
                      const char* kind = "allreduce");
  // allgather_into_tensor and reduce_scatter_tensor over pairs of tensors, one
  // engine collective per pair; `call` names them in errors.
  c10::intrusive_ptr<c10d::Work> launch_gathers_into(const std::vector<at::Tensor>& outputs,
                                                     const std::vector<at::Tensor>& inputs,
                                                     const char* call, c10d::OpType type,
                                                     const char* title);
  c10::intrusive_ptr<c10d::Work> launch_reducescatters(const std::vector<at::Tensor>& outputs,
                                                       const std::vector<at::Tensor>& inputs,
                                                       const c10d::ReduceOp& op, const char* call,
                                                       c10d::OpType type, const char* title);
  // One engine collective each, under `name` (CollectiveNames); their
  // arguments are checked before the names are taken.
  Step allgather_step(at::Tensor input, std::function<void(const std::vector<std::byte>&)> place,
                      const char* call, std::string name);
  void check_reducescatter(const at::Tensor& input, const at::Tensor& output,
                           const c10d::ReduceOp& op, const char* call) const;
  Step reducescatter_step(at::Tensor input, at::Tensor output, const c10d::ReduceOp& op,
                          const char* call, std::string name);
  concord::Engine& engine(const char* call);
  // The direct path (direct.cpp): whether this allreduce takes it, and running it.
  // The op as concord's where the call takes the path, none otherwise.
  std::optional<ReduceSpec> direct_path_op(const std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<c10d::Work> allreduce_direct(at::Tensor& tensor, const ReduceSpec& spec,
                                                  bool async);
  c10::intrusive_ptr<c10d::Work> barrier_direct();
  // Whether the group has the direct path: its communicator, and a timeout to
  // give its checked calls a deadline. The same on every rank.
  bool has_direct_path() const { return direct_ && timeout_.count() > 0; }
  // The group's timeout in seconds, as concord's options take it (0: none).
  double timeout_s() const { return std::chrono::duration<double>(timeout_).count(); }
  // Runs `call` on the lane, synchronously or not, after the engine's earlier
  // collectives where `after_engine`, and completes `work` with its error;
  // raises, naming `what`, where the group was shut down.
  void run_direct(const c10::intrusive_ptr<ConcordWork>& work, const char* what, bool async,
                  bool after_engine, std::function<void()> call);
  // Completes an asynchronous direct call's Work here, its Future on the completer.
  void complete_async(const c10::intrusive_ptr<ConcordWork>& work, std::exception_ptr error);
  // A checked call's options: the group's timeout, and `label` in its errors.
  concord::AllreduceOptions checked(const std::string& label) const;

  std::unique_ptr<concord::Engine> engine_;
  // The direct path's own communicator (null where the group spans nodes or has
  // one rank, or CONCORD_TORCH_DIRECT=0), the order of its calls, and their
  // count (which names them in errors).
  std::optional<concord::Communicator> direct_;
  std::atomic<std::uint64_t> direct_calls_{0};
  std::chrono::milliseconds timeout_;  // the group's; 0: none
  std::string group_name_;
  InFlight in_flight_;
  CollectiveNames names_;
  Completer completer_;  // joined while the engine is still alive
  // Last, so destroyed first: its tasks use direct_, in_flight_ and completer_
  // (shutdown() stops it before any of them goes).
  SerialLane lane_;
};

}  // namespace concord_torch

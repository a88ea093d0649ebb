// The fusion engine: asynchronous, named collectives that ranks may submit in any
// order, from any thread. A background thread agrees with the other ranks on
// which names are ready everywhere and in which order to run them, packs ready
// allreduces of one dtype and op into fusion buckets, and completes handles.
#pragma once

#include <concord/communicator.hpp>
#include <concord/error.hpp>
#include <concord/types.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace concord {

namespace detail {
class EngineCore;
struct Work;
}  // namespace detail

// A tensor the caller owns: `count` elements of `dtype` at `data`. It must stay
// valid, and untouched by the caller, until its handle completes.
//
// Device::Cuda tensors are stream-ordered: the engine reads a tensor only after
// the work queued on `stream` before the enqueue call (an event is recorded there),
// and the result is complete on the device before the handle completes, so work
// queued after Handle::wait() (or in the completion callback) sees it.
struct TensorView {
  void* data = nullptr;
  std::size_t count = 0;
  DataType dtype = DataType::Float32;
  Device device = Device::Cpu;
  CudaStream stream = nullptr;  // Cuda only
};

// Completion of one enqueued collective. Copies share the same operation.
class Handle {
 public:
  Handle() = default;
  bool valid() const noexcept { return work_ != nullptr; }
  // Blocks until the operation is complete; throws its concord::Error if it failed.
  void wait() const;
  // True once complete (successfully or not); never blocks.
  bool test() const;
  // For allgather: the gathered rows of every rank, in rank order; first_dims()[r]
  // is rank r's first dimension. For alltoall: the rows received, in source-rank
  // order; first_dims()[r] rows came from rank r. For reducescatter: this rank's
  // block of the reduced rows; first_dims()[r] is rank r's block's rows. For
  // join: the last rank to join, as one int32 (4 bytes). Block until the results are in (they may
  // also be read from the operation's own completion callback); throw on failure.
  const std::vector<std::byte>& output() const;
  const std::vector<std::size_t>& first_dims() const;

 private:
  friend class detail::EngineCore;
  explicit Handle(std::shared_ptr<detail::Work> work) : work_(std::move(work)) {}
  std::shared_ptr<detail::Work> work_;
};

// Called once, on an engine thread, when the operation completes (before its
// Handle reports completion): with nullptr on success, or the error. It must not
// block on handles of the same engine, nor throw, nor destroy the engine; it may
// call Engine::shutdown() (which then only requests the stop).
using Completion = std::function<void(const Error* error)>;

struct EngineOptions {
  // Largest fusion bucket in bytes; 0 disables fusion (one collective per tensor).
  // Unset: CONCORD_FUSION_THRESHOLD or the built-in default (docs/ENGINE.md).
  std::optional<std::size_t> fusion_threshold;
  // Where buckets are packed into a fusion buffer (ranks on several nodes, or a
  // flat algorithm), a host tensor of at least this many bytes is reduced where
  // it lies, in a bucket of its own, instead of being copied in and out; 0: every
  // tensor may be packed. Unset: CONCORD_FUSION_IN_PLACE_BYTES or 256 KiB.
  std::optional<std::size_t> fusion_in_place_bytes;
  // How long a cycle waits for more tensors before negotiating, in milliseconds.
  // 0 (back to back) to 10000; an engine with nothing in flight cycles every
  // 20 ms at most until its next submission (docs/ENGINE.md). Unset:
  // CONCORD_CYCLE_TIME_MS or the built-in default.
  std::optional<double> cycle_time_ms;
  // Warn about (and, if set, fail) tensors that some ranks have not submitted.
  // Seconds, 0 to 1e7 (a timeout of 0: none); others are Error(InvalidArgument).
  // Unset: CONCORD_STALL_WARNING_S (60) and CONCORD_STALL_TIMEOUT_S (off).
  std::optional<double> stall_warning_s;
  std::optional<double> stall_timeout_s;
  // Chrome-trace file; unset: CONCORD_TIMELINE (off when empty).
  std::optional<std::string> timeline_path;
  // Algorithm for the fused allreduces.
  Algorithm algorithm = Algorithm::Auto;
};

class Engine {
 public:
  // Collective over `comm`: duplicates it twice (data and control), so the
  // engine's traffic never meets the caller's. Needs MPI_THREAD_MULTIPLE.
  explicit Engine(const Communicator& comm, const EngineOptions& options = {});
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // result = postscale * (op over ranks of prescale * tensor), in place. Avg is
  // Sum with postscale divided by the rank count. Scales must be 1 for integers.
  Handle enqueue_allreduce(const std::string& name, TensorView tensor, ReduceOp op,
                           double prescale = 1.0, double postscale = 1.0,
                           Completion done = nullptr);
  // Several tensors submitted atomically: they become ready together on this
  // rank (names[i] goes with tensors[i]).
  // `done`, if given, is called once, after the last of the group completed, with
  // the first error if any failed; for an empty group, at once on the calling thread.
  std::vector<Handle> enqueue_grouped_allreduce(const std::vector<std::string>& names,
                                                const std::vector<TensorView>& tensors, ReduceOp op,
                                                double prescale = 1.0, double postscale = 1.0,
                                                Completion done = nullptr);
  // Root's tensor to every rank, in place; count and dtype must agree.
  Handle enqueue_broadcast(const std::string& name, TensorView tensor, int root,
                           Completion done = nullptr);
  // Every rank's tensor of shape [first_dim, row...] (row_elements elements per
  // row; tensor.count == first_dim * row_elements); first_dim may differ between
  // ranks. The result is in Handle::output().
  Handle enqueue_allgather(const std::string& name, TensorView tensor, std::size_t row_elements,
                           Completion done = nullptr);
  // tensor is [rows, row...] (row_elements elements per row); the first
  // send_rows[r] rows go to rank 0, ... in order (send_rows.size() == size(), sum
  // == rows). Empty send_rows splits the rows evenly (an error if size() does not
  // divide them). Handle::output() holds the rows received, in source-rank order;
  // first_dims()[r] the rows received from rank r. Host tensors only.
  Handle enqueue_alltoall(const std::string& name, TensorView tensor, std::size_t row_elements,
                          std::vector<std::size_t> send_rows, Completion done = nullptr);
  // Reduces tensor ([rows, row...], the same shape on every rank) over the ranks
  // like enqueue_allreduce (scales, Avg), then rank r keeps its block of rows: the
  // first rows % size() ranks get rows / size() + 1 rows, the others rows /
  // size(). The block is in Handle::output(), first_dims()[r] is rank r's rows;
  // the tensor is left as it was. Host tensors only.
  Handle enqueue_reducescatter(const std::string& name, TensorView tensor, std::size_t row_elements,
                               ReduceOp op, double prescale = 1.0, double postscale = 1.0,
                               Completion done = nullptr);
  // This rank has no more data (Horovod's join). Until every rank has joined, the
  // allreduces the other ranks run (host tensors) get zeros from this rank, and
  // broadcast, allgather, alltoall and reducescatter fail (docs/ENGINE.md). The
  // handle completes when every rank has joined; Handle::output() holds the last
  // rank to join as one int32. One join per rank at a time; it may be called again
  // once it completed.
  Handle enqueue_join(Completion done = nullptr);

  // Stops the background thread after the current cycle; pending handles fail
  // with ErrorCode::Shutdown. Idempotent; safe when peers are already gone
  // (gives up on them after 10 s). Also safe from a completion
  // callback: there (on the engine's own threads) it requests the stop and
  // returns at once; a later shutdown() from another thread, or the destructor,
  // waits for the threads to end. Never destroy the engine from a callback.
  void shutdown();
  // For a rank that gives up on its peers (c10d's abort, an error elsewhere):
  // the collective or negotiation now waiting for them stops at once, every
  // pending and later operation fails with ErrorCode::Shutdown naming the
  // abort, and the engine stops for good. The peers are not told: their waits
  // for this rank end at their own deadline, or their own abort. Returns at
  // once, from any thread (a completion callback too); shutdown() or the
  // destructor then waits for the engine's threads.
  void abort() noexcept;

  int rank() const;
  int size() const;

 private:
  friend void shutdown_default_engine();
  std::unique_ptr<detail::EngineCore> core_;
};

// The process-wide engine on Communicator::world(), shared by the Python and
// TensorFlow bindings (so their names meet in one negotiation). Made by the
// first call, which is collective over the world: call it at the same point on
// every rank (concord.init() in Python does).
//
// The default engine must be shut down before MPI_Finalize. When concord
// initialised MPI, an exit handler does it before concord finalizes MPI; when
// the application initialised MPI, call shutdown_default_engine() before its
// MPI_Finalize.
Engine& default_engine();
// Shuts the default engine down and waits for its threads (idempotent; safe at
// exit); default_engine() then throws Error(Shutdown). From one of the default
// engine's completion callbacks it only requests the stop (see
// Engine::shutdown); a later call from another thread, or the exit handler,
// waits for it.
void shutdown_default_engine();

}  // namespace concord

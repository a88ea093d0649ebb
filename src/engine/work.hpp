// One enqueued collective, shared by the caller's Handle and the engine.
#pragma once

#include <concord/engine.hpp>
#include <concord/error.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace concord::detail {

namespace cuda {
class Event;  // cuda/cuda_runtime.hpp (CUDA builds only)
}

enum class WorkKind : std::uint8_t {
  Allreduce,
  Broadcast,
  Allgather,
  Alltoall,
  Reducescatter,
  Join
};

// The collective's name in messages: "allreduce", "alltoall", ...
const char* kind_name(WorkKind kind);

// The name a join travels under in the negotiation (never cached: every rank
// must see who has joined). enqueue_* rejects it as a user tensor's name.
inline constexpr const char* kJoinName = "concord/join";

// What every rank must agree on for one name.
struct Signature {
  WorkKind kind = WorkKind::Allreduce;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;     // allreduce only
  std::uint64_t count = 0;         // elements; for allgather and alltoall, elements per row
  std::int32_t root = 0;           // broadcast only
  std::uint64_t row_elements = 0;  // reducescatter: elements per row of the first dimension
  double prescale = 1.0;           // allreduce only
  double postscale = 1.0;
  Device device = Device::Cpu;

  bool operator==(const Signature&) const = default;
  // "allreduce float32 sum count=10" etc., for error messages.
  std::string describe() const;
};

using Clock = std::chrono::steady_clock;

struct Work {
  std::string name;
  Signature sig;
  TensorView tensor;
  std::uint64_t first_dim = 0;           // allgather: rows of this rank
  std::vector<std::uint64_t> send_rows;  // alltoall: rows this rank sends to each rank
  // A stand-in on a rank that has joined: zeros of the agreed count and dtype,
  // held in `zeros`; no handle, not in the engine's in-flight table.
  bool filler = false;
  std::vector<std::byte> zeros;
  Completion done;
  Clock::time_point enqueued = Clock::now();
  bool announced = false;  // negotiated by name, not by cache bit (engine thread only)
  // Part of a whole group (a grouped allreduce): the engine cycles without
  // waiting out its cycle time until the group's tensors are agreed.
  bool in_whole_group = false;
  // Device tensors: an event recorded on the tensor's stream at enqueue; the
  // engine's device work waits for it (engine/device_buckets.hpp).
  std::shared_ptr<cuda::Event> ready;

  // Completes the work: wakes waiters and runs the completion callback.
  void finish(std::optional<Error> failure);

  // Set by the first EngineCore::complete(): a work completes once, even when a
  // last-resort error path completes everything that may not have completed.
  std::atomic<bool> claimed{false};

  std::mutex mutex;
  std::condition_variable cv;
  bool results_ready = false;  // error/output set (before the completion callback runs)
  bool complete = false;       // and the callback has run
  std::optional<Error> error;
  std::vector<std::byte> output;        // allgather/alltoall/reducescatter result; join: int32
  std::vector<std::size_t> first_dims;  // rows per rank (received from / block of)
};

}  // namespace concord::detail

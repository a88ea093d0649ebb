// The engine's machinery behind concord::Engine: the submission queue, the
// background thread that negotiates and runs cycles, and the fusion pipeline.
#pragma once

#include "core/task_thread.hpp"
#include "engine/device_buckets.hpp"
#include "engine/fusion.hpp"
#include "engine/negotiator.hpp"
#include "engine/timeline.hpp"
#include "engine/work.hpp"

#include <concord/engine.hpp>

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace concord::detail {

// Whether a collective's failure may have left this rank out of step with its
// peers: false for argument errors (InvalidArgument, Mismatch), which every rank
// meets alike because the ranks agreed on the collective's signature, or computes
// alike from values they all hold (a gathered size that overflows); true for any
// other (an allocation, a device copy or an MPI call that failed on this rank),
// after which the engine's communicator fails (EngineCore::fail_if_out_of_step).
bool may_leave_ranks_out_of_step(const Error& error);

// The error an operation fails with when the exception `e` escaped it: a
// concord::Error as it is; an allocation that failed (std::bad_alloc, or
// std::length_error for a size no container can hold) as SystemError; anything
// else as Internal. `context` says what failed ("Engine: tensor 'x'").
Error to_error(const std::exception_ptr& e, int rank, const std::string& context);

// The timeline's name for a collective's phase ("ALLTOALL", ...).
const char* phase_name(WorkKind kind);
// Horovod's split of `rows` over `ranks` for reducescatter: the first
// rows % ranks ranks get one row more.
std::vector<std::size_t> reducescatter_rows(std::uint64_t rows, int ranks);

class EngineCore {
 public:
  EngineCore(const Communicator& comm, const EngineOptions& options);
  ~EngineCore();

  // Validates and queues `works` atomically (all or none); throws Error. A
  // `whole_group` (a grouped allreduce: the caller sends these together) starts
  // the next cycle at once instead of after the cycle time, and for one cycle
  // time cycles follow each other at once until the group is agreed (a peer that
  // submits its part later starts its own cycle then): the cycle time exists to
  // gather tensors that arrive one by one, and these came together.
  std::vector<Handle> submit(std::vector<std::shared_ptr<Work>> works, bool whole_group = false);
  // Requests the stop and joins the engine thread, except on one of the
  // engine's own threads (a completion callback), where it only requests it:
  // a later shutdown() from another thread, or the destructor, joins.
  void shutdown();
  // Engine::abort: aborts both communicators (their waits, and the
  // negotiator's, stop at the next poll) and wakes the engine thread, which
  // then fails everything with the abort's error. Takes no lock.
  void abort() noexcept;
  // True on the engine thread and on the packer thread.
  bool on_engine_thread() const noexcept;

  int rank() const { return data_.rank(); }
  int size() const { return data_.size(); }

 private:
  void validate(const Work& work) const;
  // Rank 0 opens the timeline at `path` (none if empty); every rank throws if it
  // could not (collective: engine_core.cpp says why).
  void open_timeline(const std::string& path);
  void loop();    // the engine thread: cycles, then fails what is left
  void cycles();  // until shutdown or a negotiation failure
  // Between cycles: a cycle time after the ranks last met (`met`), or sooner
  // when a whole group or the stop comes; an idle pace while nothing is in flight.
  void wait_for_next_cycle(Clock::time_point met, Clock::duration cycle);
  // The pace of an idle engine's cycles: short beside the stall warnings and
  // timeouts that ride on them (seconds), long beside the cost of one cycle.
  static constexpr std::chrono::milliseconds kIdleCycle{20};
  void execute(const std::vector<std::shared_ptr<Work>>& ready, Clock::time_point agreed);
  // Fails the data communicator where `error` may have left this rank out of step
  // (may_leave_ranks_out_of_step).
  void fail_if_out_of_step(const Error& error);
  void run_buckets(const std::vector<std::shared_ptr<Work>>& allreduces, Clock::time_point agreed);
  // Grows the device fusion buffer for this cycle's buckets; where it grew (in the
  // same cycles on every rank), the ranks agree that each has it, and every rank
  // throws if one has not (the engine stops).
  void size_device_fusion(const std::vector<Bucket>& buckets);
  // Collective over control_, where a fusion buffer (host or device) grew: throws
  // where another rank could not allocate its own (this rank's own failure, `mine`
  // false, is thrown by the caller, whose message names the size).
  void agree_on_fusion_buffers(bool mine);
  void run_buckets_in_place(const std::vector<Bucket>& buckets, Clock::time_point agreed);
  void run_buckets_packed(const std::vector<Bucket>& buckets, Clock::time_point agreed);
  class PackedPipeline;  // buckets.cpp: one run_buckets_packed, packer and engine thread
  void reduce_bucket(const Bucket& bucket, Clock::time_point agreed, const char* how,
                     const std::function<void()>& reduce);
  // When a bucket's phases ran, for the timeline: QUEUE runs from `agreed` to
  // the first phase (PACK, or REDUCE); PACK and UNPACK only where it went
  // through a host fusion buffer.
  using Span = std::pair<Clock::time_point, Clock::time_point>;
  struct BucketPhases {
    Clock::time_point agreed;
    Span reduce;
    std::optional<Span> pack;
    std::optional<Span> unpack;
  };
  // "in place, bucket of 3 tensors, 1200 bytes" (`how` is the layout's prefix).
  static std::string describe_bucket(const Bucket& bucket, const char* how);
  // Every layout ends here: records the bucket's spans, completes its tensors.
  // Never throws for the timeline's sake (runs on the packer thread too).
  void complete_bucket(const Bucket& bucket, const char* how, const BucketPhases& phases,
                       const std::optional<Error>& error);
  void run_one(Work& work);  // a broadcast, allgather, alltoall, reducescatter or join
  void run_broadcast(Work& work);
  void run_allgather(Work& work);
  void run_alltoall(Work& work);
  void run_reducescatter(Work& work);
  // Checks what alltoall, reducescatter and join need (engine_validate.cpp).
  void validate_rows(const Work& work) const;
  void validate_reduction(const Work& work) const;
  // Throws ErrorCode::InvalidArgument naming the tensor: "Engine: tensor 'x': what".
  [[noreturn]] void reject(const Work& work, const std::string& what) const;
  void complete(const std::shared_ptr<Work>& work, std::optional<Error> error);

  Communicator data_;     // the engine's collectives
  Communicator control_;  // negotiation only
  std::size_t fusion_threshold_;
  std::size_t fusion_in_place_bytes_;  // packed layout only; SIZE_MAX: never alone
  double cycle_time_ms_;
  StallPolicy stall_;
  Algorithm algorithm_;
  std::unique_ptr<Timeline> timeline_;  // rank 0, when asked for

  std::optional<bool> zero_copy_;        // buckets reduced in place (shared memory)?
  std::vector<std::byte> buffers_[2];    // fusion buffers, kept between cycles
  DeviceBucketStatePtr device_buckets_;  // device fusion buffer and stream, made on first use
  TaskThread packer_;

  // Guards queue_, start_now_, idle_, in_flight_, stopped_, stop_error_; stop_requested_
  // is set under it.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<Work>> queue_;
  bool start_now_ = false;  // queue_ holds a whole group: cycle without waiting
  bool idle_ = false;       // the engine thread sleeps an idle cycle: any submit wakes it
  // Every work submitted and not yet completed, wherever it is (queue_, the
  // negotiator, a bucket): the engine fails what is left here when it stops.
  std::unordered_map<std::string, std::shared_ptr<Work>> in_flight_;
  bool stopped_ = false;
  std::optional<Error> stop_error_;  // why the engine stopped, if a cycle failed
  std::atomic<bool> stop_requested_{false};
  std::mutex join_mutex_;  // one shutdown() joins at a time
  // thread_'s id, which join() resets: on_engine_thread() reads this copy.
  std::atomic<std::thread::id> engine_thread_id_{};
  std::jthread thread_;  // last: starts once everything above exists
};

}  // namespace concord::detail

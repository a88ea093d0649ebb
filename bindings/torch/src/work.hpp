// The Work a concord collective returns, and the thread that completes it.
//
// The engine calls a collective's completion on one of its own threads, which
// must not block nor run user code (docs/ENGINE.md). So it only queues the
// completion here; the backend's completer thread then copies results into the
// output tensors and completes the Work and its Future, whose callbacks (DDP's
// comm hooks, `then` chains) run there.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace concord_torch {

class ConcordWork final : public c10d::Work {
 public:
  ConcordWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs);

  // The outputs (for in-place collectives, the inputs) once complete.
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // Completes the Work and its Future: with `outputs_` on success, else the error.
  void complete(std::exception_ptr error);
  // The same in two parts, for a caller that must not run the Future's
  // callbacks itself: the Work (waiters wake, is_completed() holds), then the
  // Future (its callbacks run on the calling thread).
  void complete_work(std::exception_ptr error);
  void complete_future(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// The threads that run queued tasks (completing Works and their Futures, whose
// callbacks run there). A callback may block on another concord collective (a
// DDP comm hook that waits on a second allreduce's future), whose completion is
// then queued behind it: whenever more tasks wait than threads are idle, another
// thread starts (up to kMaxThreads), so a blocked task never holds up the ones
// it waits for. The threads end, after the queue drains, on destruction; one
// that destroys the Completer from a task of its own is detached, and ends once
// that task returns. A task posted while it is being destroyed runs on the
// poster's thread unless an idle thread takes it (the backend stops its engine
// first, so that poster is never an engine thread).
class Completer {
 public:
  static constexpr std::size_t kMaxThreads = 16;
  static constexpr std::chrono::seconds kDrainLimit{30};
  Completer();
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;
  void post(std::function<void()> task);
  // Waits until every task posted so far has run (returns at once on one of
  // the pool's own threads, which cannot wait for itself). A task that ends a
  // collective lets go of its tensors; one that does so while the interpreter
  // finalises needs the GIL that is gone, and ends its thread by a forced
  // unwind through a noexcept destructor: std::terminate. The backend's
  // shutdown (destroy_process_group, the package's exit handler) drains first.
  void drain();

 private:
  struct Pool {  // shared with the threads, so a detached one outlives the Completer safely
    std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable drained;  // tasks empty and none running
    std::deque<std::function<void()>> tasks;
    std::size_t idle = 0;
    std::size_t running = 0;
    bool stopping = false;
  };
  static void run(const std::shared_ptr<Pool>& pool);
  std::shared_ptr<Pool> pool_;
  std::vector<std::thread> threads_;  // guarded by pool_->mutex
};

}  // namespace concord_torch

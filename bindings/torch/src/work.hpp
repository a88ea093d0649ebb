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

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
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

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread running queued tasks in order; joined (after the queue drains) on
// destruction.
class Completer {
 public:
  Completer();
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;
  void post(std::function<void()> task);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace concord_torch

#include "work.hpp"

#include <utility>

namespace concord_torch {

ConcordWork::ConcordWork(int rank, c10d::OpType type, const char* title,
                         std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, title),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

std::vector<at::Tensor> ConcordWork::result() {
  wait();
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> ConcordWork::getFuture() {
  return future_;
}

void ConcordWork::complete(std::exception_ptr error) {
  // The Work first, so a Future callback that waits on it finds it done.
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

Completer::Completer() : thread_([this] { run(); }) {}

Completer::~Completer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Completer::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void Completer::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();  // tasks catch their own errors (ConcordBackend::launch)
    lock.lock();
  }
}

}  // namespace concord_torch

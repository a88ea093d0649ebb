#include "work.hpp"

#include <Python.h>

#include <algorithm>
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
  complete_work(error);
  complete_future(error);
}

void ConcordWork::complete_work(std::exception_ptr error) {
  finish(error);
}

void ConcordWork::complete_future(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

Completer::Completer() : pool_(std::make_shared<Pool>()) {}

Completer::~Completer() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    pool_->stopping = true;
    threads.swap(threads_);
  }
  pool_->wake.notify_all();
  for (std::thread& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // this very task's thread: it ends when the task returns
    } else {
      t.join();
    }
  }
}

void Completer::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    // Once the destructor has taken the threads, a thread started here would be
    // left joinable (std::terminate). An idle thread still draining takes the
    // task; where none is idle (all gone, or all busy, perhaps the poster itself,
    // which may wait on this very task) it runs here, so no Work is left
    // incomplete and the destructor's join cannot wait on it.
    const bool run_here = pool_->stopping && pool_->idle <= pool_->tasks.size();
    if (!run_here) {
      pool_->tasks.push_back(std::move(task));
      task = nullptr;
      if (!pool_->stopping && pool_->tasks.size() > pool_->idle && threads_.size() < kMaxThreads) {
        threads_.emplace_back([pool = pool_] { run(pool); });
      }
    }
  }
  if (task) {
    task();
    return;
  }
  pool_->wake.notify_one();
}

void Completer::run(const std::shared_ptr<Pool>& pool) {
  std::unique_lock<std::mutex> lock(pool->mutex);
  for (;;) {
    ++pool->idle;
    pool->wake.wait(lock, [&] { return pool->stopping || !pool->tasks.empty(); });
    --pool->idle;
    if (pool->tasks.empty()) return;  // stopping, and nothing left
    auto task = std::move(pool->tasks.front());
    pool->tasks.pop_front();
    ++pool->running;
    lock.unlock();
    task();          // tasks catch their own errors (finish_launch)
    task = nullptr;  // what it holds goes before it counts as done (drain)
    lock.lock();
    if (--pool->running == 0 && pool->tasks.empty()) pool->drained.notify_all();
  }
}

void Completer::drain() {
  {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    const auto me = std::this_thread::get_id();
    if (std::any_of(threads_.begin(), threads_.end(),
                    [me](const std::thread& t) { return t.get_id() == me; })) {
      return;
    }
  }
  // A task may run a Python callback (a Future's then()): it needs the GIL,
  // which a Python caller of shutdown may hold. Bounded, so that a task stuck
  // in user code cannot keep the process from exiting.
  PyThreadState* released =
      Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  {
    std::unique_lock<std::mutex> lock(pool_->mutex);
    pool_->drained.wait_for(lock, kDrainLimit,
                            [&] { return pool_->tasks.empty() && pool_->running == 0; });
  }
  if (released != nullptr) PyEval_RestoreThread(released);
}

}  // namespace concord_torch

// A worker thread that runs tasks in submission order; submit() returns a
// future to wait on. The engine packs and unpacks fusion buckets on one while
// its own thread runs the collective of the previous bucket; a communicator
// runs Hierarchical's step across nodes on one while the calling thread works
// on shared memory (CommunicatorState::network_thread).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace concord::detail {

class TaskThread {
 public:
  TaskThread() : thread_([this](std::stop_token stop) { run(stop); }) {}
  ~TaskThread() {
    // The stop is requested under the mutex: the worker checks it under the
    // mutex before it blocks, so it cannot miss the wakeup.
    {
      std::lock_guard lock(mutex_);
      thread_.request_stop();
    }
    cv_.notify_all();
  }  // jthread joins; tasks still queued run first
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  // An exception a task throws is stored in its future.
  std::future<void> submit(std::function<void()> task) {
    std::packaged_task<void()> packaged(std::move(task));
    std::future<void> done = packaged.get_future();
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(packaged));
    }
    cv_.notify_one();
    return done;
  }

  // The worker's id: the engine tells calls from its own tasks by it.
  std::thread::id id() const noexcept { return thread_.get_id(); }

 private:
  void run(const std::stop_token& stop) {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !tasks_.empty() || stop.stop_requested(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        task();  // the task's own exceptions go to its future
      } catch (...) {
        // std::future_error only, which cannot happen here: keep the thread.
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> tasks_;
  std::jthread thread_;  // last: starts after the members it uses exist
};

}  // namespace concord::detail

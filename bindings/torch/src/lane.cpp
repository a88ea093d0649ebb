// SerialLane (lane.hpp): one task at a time, in the order they came, on the
// caller's thread or the lane's own.
#include "lane.hpp"

#include <utility>

namespace concord_torch {

SerialLane::~SerialLane() {
  stop();
}

bool SerialLane::run_here(const std::function<void()>& task) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return stopping_ || (tasks_.empty() && !busy_); });
    if (stopping_) return false;
    busy_ = true;
  }
  // Tasks catch their own errors; should one escape, the lane still frees.
  struct Release {
    SerialLane* lane;
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(lane->mutex_);
        lane->busy_ = false;
      }
      lane->changed_.notify_all();
    }
  } release{this};
  task();
  return true;
}

bool SerialLane::post(std::function<void()> task, std::function<void()> cancel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    // The thread first: should it fail to start, nothing is queued that would
    // run later as a call nobody is waiting for.
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    tasks_.push_back(Task{std::move(task), std::move(cancel)});
  }
  changed_.notify_all();
  return true;
}

void SerialLane::stop() {
  // One stopper at a time: a second returns only once the first has joined.
  std::lock_guard<std::mutex> stopping(stop_mutex_);
  std::thread thread;
  std::deque<Task> unstarted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    thread.swap(thread_);
    unstarted.swap(tasks_);
  }
  changed_.notify_all();
  for (Task& task : unstarted) {
    try {
      task.cancel();
    } catch (...) {
      // Cancelling completes a Work with an error; one that cannot be posted
      // must not keep the others from theirs.
    }
  }
  if (thread.joinable()) thread.join();
  // A synchronous task running on its caller's thread, as the lane stops.
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return !busy_; });
}

void SerialLane::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !busy_ && (!tasks_.empty() || stopping_); });
    if (tasks_.empty()) return;  // stopping, and nothing left
    auto task = std::move(tasks_.front().run);
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    try {
      task();
    } catch (...) {
      // Tasks complete their Work with their own errors; nothing escaping one
      // may end the process from this thread.
    }
    task = nullptr;  // what it holds goes before the next runs
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace concord_torch

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
    tasks_.push_back(Task{std::move(task), std::move(cancel)});
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
  return true;
}

void SerialLane::stop() {
  std::thread thread;
  std::deque<Task> unstarted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    thread.swap(thread_);
    unstarted.swap(tasks_);
  }
  changed_.notify_all();
  for (Task& task : unstarted) task.cancel();
  if (thread.joinable()) thread.join();
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
    task();
    task = nullptr;  // what it holds goes before the next runs
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace concord_torch

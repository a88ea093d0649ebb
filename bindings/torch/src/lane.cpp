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

bool SerialLane::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
  return true;
}

void SerialLane::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    thread.swap(thread_);
  }
  changed_.notify_all();
  if (thread.joinable()) thread.join();  // it runs what is queued first
}

void SerialLane::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return !busy_ && (!tasks_.empty() || stopping_); });
    if (tasks_.empty()) return;  // stopping, and nothing left
    auto task = std::move(tasks_.front());
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

// The order a group's direct calls run in (direct.cpp): one at a time, as they
// were made. c10d's contract is that every rank makes a group's calls in the
// same order, so running them in that order is what matches them up, with no
// negotiation. A synchronous call runs on its caller's thread once those before
// it are done; an asynchronous one runs on the lane's own thread, which starts
// with the first.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace concord_torch {

class SerialLane {
 public:
  SerialLane() = default;
  ~SerialLane();
  SerialLane(const SerialLane&) = delete;
  SerialLane& operator=(const SerialLane&) = delete;

  // Runs `task` here, after every task posted before it; the next ones wait
  // for it. A task catches its own errors (it completes a Work with them).
  // False, without running it, once the lane has stopped.
  bool run_here(const std::function<void()>& task);
  // Queues `task` behind the others for the lane's thread; `cancel` instead if
  // the lane stops before it starts. False, without queueing it, once the lane
  // has stopped.
  bool post(std::function<void()> task, std::function<void()> cancel);
  // Refuses later calls, cancels the queued tasks that have not started (their
  // peers may never come: a rank leaving after an error must not wait them
  // out), and returns once the task running, on either thread, has returned.
  // A running task is not interrupted: a checked call ends when its peers come,
  // at its deadline (gloo's destructor likewise waits for its work), or at once
  // where the backend aborted its communicator first (ConcordBackend::abort).
  // Idempotent, and safe from several threads.
  void stop();

 private:
  void loop();
  std::mutex stop_mutex_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a task queued or finished, or stopping
  struct Task {
    std::function<void()> run;
    std::function<void()> cancel;
  };
  std::deque<Task> tasks_;
  bool busy_ = false;  // a task is running, on either thread
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace concord_torch

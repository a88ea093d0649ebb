#include "names.hpp"

#include <utility>

namespace concord_torch {

CollectiveNames::CollectiveNames(std::string group, std::size_t window)
    : group_(std::move(group)), window_(window) {}

std::string CollectiveNames::next(const std::string& kind) {
  concord::Handle earlier;
  std::string name;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t k = calls_[kind]++ % window_;
    name = group_ + "/" + kind + "#" + std::to_string(k);
    auto it = pending_.find(name);
    if (it != pending_.end()) {
      earlier = std::move(it->second);
      pending_.erase(it);
    }
  }
  // Its failure, if any, was reported through its own Work.
  if (earlier.valid()) {
    try {
      earlier.wait();
    } catch (...) {
    }
  }
  return name;
}

void CollectiveNames::in_flight(const std::string& name, concord::Handle handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Drop completed entries now and then, so the map holds at most about a
  // window's worth of names per kind.
  if (pending_.size() > 4 * window_) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      it = it->second.test() ? pending_.erase(it) : std::next(it);
    }
  }
  pending_[name] = std::move(handle);
}

}  // namespace concord_torch

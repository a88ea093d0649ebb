#include "names.hpp"

#include <utility>

namespace concord_torch {

CollectiveNames::CollectiveNames(std::string group, std::size_t window)
    : group_(std::move(group)), window_(window) {}

std::vector<std::string> CollectiveNames::next(const std::string& kind, std::size_t parts) {
  std::vector<concord::Handle> earlier;
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t k = calls_[kind]++ % window_;
    const std::string base = group_ + "/" + kind + "#" + std::to_string(k);
    for (std::size_t i = 0; i < parts; ++i) {
      names.push_back(parts == 1 ? base : base + "." + std::to_string(i));
      auto it = pending_.find(names.back());
      if (it != pending_.end()) {
        earlier.push_back(std::move(it->second));
        pending_.erase(it);
      }
    }
  }
  // Their failures, if any, were reported through their own Works.
  for (const concord::Handle& h : earlier) {
    try {
      h.wait();
    } catch (...) {
    }
  }
  return names;
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

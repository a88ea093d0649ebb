// The engine's names for a process group's collectives.
//
// torch calls a group's collectives in the same order on every rank, so the
// k-th call of a kind ("allreduce", "broadcast", ...) gets the same name
// everywhere: "<group>/<kind>#<k mod window>". The engine caches each name it
// has seen (one bit per name in every cycle), so names repeat after `window`
// calls of a kind instead of growing without bound. Should a name come round
// again while its previous use is still in flight on this rank (more than
// `window` calls of one kind outstanding), the caller first waits for that one.
#pragma once

#include <concord/engine.hpp>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace concord_torch {

class CollectiveNames {
 public:
  CollectiveNames(std::string group, std::size_t window);
  // The next name of `kind`; waits (outside the lock) for its earlier use to
  // complete if that is still in flight.
  std::string next(const std::string& kind);
  // Registers the handle of a name's current use (after its enqueue).
  void in_flight(const std::string& name, concord::Handle handle);

 private:
  std::string group_;
  std::size_t window_;
  std::mutex mutex_;
  std::map<std::string, std::size_t> calls_;  // by kind
  std::unordered_map<std::string, concord::Handle> pending_;
};

}  // namespace concord_torch

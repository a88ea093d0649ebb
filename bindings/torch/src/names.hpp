// The engine's names for a process group's collectives.
//
// torch calls a group's collectives in the same order on every rank, so the
// k-th call of a kind ("allreduce", "broadcast", ...) gets the same name
// everywhere: "<group>/<kind>#<k mod window>", and its i-th tensor, where it
// has several, "<group>/<kind>#<k mod window>.<i>". The engine caches each name it
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
#include <vector>

namespace concord_torch {

class CollectiveNames {
 public:
  CollectiveNames(std::string group, std::size_t window);
  // The names of the next call of `kind` with `parts` tensors: the call's name,
  // and for several tensors one per tensor ("<name>.<i>"). Waits (outside the
  // lock) for their earlier uses to complete where those are still in flight.
  std::vector<std::string> next(const std::string& kind, std::size_t parts);
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

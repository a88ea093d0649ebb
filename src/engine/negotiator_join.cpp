// Join (Horovod's hvd.join()): a rank that has run out of data submits a join
// and, until every rank has joined, takes part in the allreduces the others
// agree on with zeros of the agreed count and dtype. The join is announced by
// name and never cached, so the registry (the same on every rank) says who has
// joined; every decision below reads only the registry and the cycle's bits, so
// every rank makes it alike.
//
// A joining rank negotiates its own requests by name, never through cache bits:
// its bits stand for zeros, so a request of its own that waits on a cached id
// would be filled for, and itself never run nor fail, if another rank changed
// that name's signature meanwhile (its handle would hang). By name, the
// registry holds both signatures, and the name fails with a mismatch everywhere.
#include "engine/negotiator.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace concord::detail {
namespace {

// What a joined rank can stand in for with zeros.
bool fillable(const Signature& sig) {
  return sig.kind == WorkKind::Allreduce && sig.device == Device::Cpu;
}

}  // namespace

std::vector<bool> Negotiator::joined_ranks() const {
  return announced_by(kJoinName);
}

void Negotiator::set_joined_bits(std::uint64_t* all_ready_words) const {
  if (!joined_ranks()[static_cast<std::size_t>(rank_)]) return;
  for (std::size_t id = 0; id < cache_.size(); ++id) {
    const std::string& name = cache_[id].first;
    // A name in the registry completes there, with every rank's signature. A name
    // this rank holds a request of (accepted this cycle, say, and announced by name
    // in this cycle's exchange, which comes after these bits) is not zeros: its
    // request contributes its data once the others' requests meet it by name.
    if (fillable(cache_[id].second) && !registry_.contains(name) && !pending_.contains(name)) {
      all_ready_words[id / 64] |= std::uint64_t{1} << (id % 64);
    }
  }
}

bool Negotiator::joining() const {
  return pending_.contains(kJoinName) || joined_ranks()[static_cast<std::size_t>(rank_)];
}

void Negotiator::announce_held_requests() {
  for (auto& [name, w] : pending_) {
    if (w->announced || w->sig.kind == WorkKind::Join) continue;
    w->announced = true;
    to_announce_.push_back(w);
  }
}

std::shared_ptr<Work> Negotiator::take_or_fill(const std::string& name, const Signature& sig,
                                               bool announced_here) {
  auto it = pending_.find(name);
  // Our own work when it is the one agreed on: announced here, or cached with
  // the agreed signature (a joined rank sets bits for names it does not hold).
  if (it != pending_.end() &&
      (announced_here || (!it->second->announced && it->second->sig == sig))) {
    auto work = it->second;
    pending_.erase(it);
    return work;
  }
  if (announced_here || !fillable(sig)) return nullptr;  // failed here already
  auto zeros = std::make_shared<Work>();
  zeros->name = name;
  zeros->sig = sig;
  zeros->filler = true;
  zeros->zeros.assign(sig.count * size_of(sig.dtype), std::byte{0});
  zeros->tensor = TensorView{zeros->zeros.data(), sig.count, sig.dtype, Device::Cpu, nullptr};
  return zeros;
}

void Negotiator::fail_while_joined(const std::vector<bool>& joined, Outcome& out) {
  if (std::none_of(joined.begin(), joined.end(), [](bool j) { return j; })) return;
  std::vector<int> who;
  for (std::size_t r = 0; r < joined.size(); ++r) {
    if (joined[r]) who.push_back(static_cast<int>(r));
  }
  auto error = [&](const std::string& name, const Signature& sig) {
    return Error(
        ErrorCode::InvalidArgument, rank_,
        fmt::format("Engine: tensor '{}': {}{} cannot run while ranks {} have joined "
                    "(until every rank joins, only allreduces of host tensors run, "
                    "with zeros from the joined ranks)",
                    name, sig.device == Device::Cuda ? "device " : "", kind_name(sig.kind), who));
  };
  for (auto it = registry_.begin(); it != registry_.end();) {
    const auto& by_rank = it->second.by_rank;
    auto sig = std::find_if(by_rank.begin(), by_rank.end(), [](const auto& s) { return s; });
    if (it->first == kJoinName || sig == by_rank.end() || fillable(**sig)) {
      ++it;
      continue;
    }
    const std::string name = it->first;
    const Signature what = **sig;
    it = registry_.erase(it);
    fail_local(name, error(name, what), out);
  }
  std::vector<std::pair<std::string, Signature>> unfit;
  for (const auto& [name, w] : pending_) {
    if (w->sig.kind != WorkKind::Join && !fillable(w->sig)) unfit.emplace_back(name, w->sig);
  }
  for (const auto& [name, sig] : unfit) fail_local(name, error(name, sig), out);
}

bool Negotiator::complete(const std::string& name, const Registered& entry,
                          const std::vector<bool>& joined) const {
  const auto first = std::find_if(entry.by_rank.begin(), entry.by_rank.end(),
                                  [](const auto& s) { return s.has_value(); });
  const bool fill = name != kJoinName && first != entry.by_rank.end() && fillable(**first);
  for (std::size_t r = 0; r < joined.size(); ++r) {
    if (!entry.by_rank[r].has_value() && !(fill && joined[r])) return false;
  }
  return true;
}

void Negotiator::settle_registry(int last_join, Outcome& out) {
  const std::vector<bool> joined = joined_ranks();
  const bool all_joined = std::all_of(joined.begin(), joined.end(), [](bool j) { return j; });
  if (!all_joined) fail_while_joined(joined, out);
  // Complete: every rank announced it, or (an allreduce of host tensors) every
  // rank that has not joined did; in announcement order.
  std::vector<std::pair<std::uint64_t, std::string>> ready;
  for (const auto& [name, entry] : registry_) {
    if (complete(name, entry, joined)) ready.emplace_back(entry.order, name);
  }
  std::sort(ready.begin(), ready.end());
  std::shared_ptr<Work> join;
  for (const auto& [order, name] : ready) {
    const auto& by_rank = registry_[name].by_rank;
    // A copy: the registry entry is erased below.
    const Signature first =
        **std::find_if(by_rank.begin(), by_rank.end(), [](const auto& s) { return s.has_value(); });
    const bool agree = std::all_of(by_rank.begin(), by_rank.end(),
                                   [&](const auto& s) { return !s || *s == first; });
    if (!agree) {
      std::string values;
      for (std::size_t r = 0; r < by_rank.size(); ++r) {
        if (!by_rank[r]) continue;
        values +=
            fmt::format("{}rank {}: {}", values.empty() ? "" : "; ", r, by_rank[r]->describe());
      }
      fail_local(
          name,
          Error(ErrorCode::Mismatch, rank_,
                fmt::format("tensor '{}': ranks submitted it differently ({})", name, values)),
          out);
      registry_.erase(name);
      continue;
    }
    if (first.kind != WorkKind::Join) {
      auto idx = cache_index_.find(name);
      if (idx != cache_index_.end()) {
        cache_[idx->second].second = first;
      } else {
        cache_index_.emplace(name, cache_.size());
        cache_.emplace_back(name, first);
      }
    }
    const bool mine = by_rank[static_cast<std::size_t>(rank_)].has_value();
    registry_.erase(name);
    auto work = take_or_fill(name, first, mine);
    if (!work) continue;
    if (first.kind != WorkKind::Join) {
      out.ready.push_back(std::move(work));
      continue;
    }
    // Every rank has joined: the join completes (last, after this cycle's
    // allreduces) with the rank whose join record came last.
    const auto last = static_cast<std::int32_t>(last_join);
    work->output.resize(sizeof last);
    std::memcpy(work->output.data(), &last, sizeof last);
    join = std::move(work);
  }
  if (join) out.ready.push_back(std::move(join));
}

}  // namespace concord::detail

// Agreement on which named tensors are ready on every rank, and in which order
// they run. Runs on the engine's background thread, one cycle at a time, in
// lockstep with the other ranks over the control communicator.
//
// A name is negotiated in full the first time (and whenever its signature
// changes, on this rank or on another that announced it): ranks exchange (name, signature) records
// with an allgather, and once every rank has announced a name with equal signatures it gets a cache
// id, the same on every rank because every rank applies the same records in the same order. From
// then on a cycle costs one small allreduce of bit vectors: the AND of "ready here" bits says what
// runs, the OR says what is pending somewhere (for stall detection). Ready work runs in cache-id
// order, then newly agreed names in the order they were announced, identically on every rank.
//
// Stalls (work some ranks submitted and others not) are the StallMonitor's
// (stall_monitor.hpp): it decides on rank 0 and words the messages; the
// Negotiator carries its decisions to every rank and acts on them.
#pragma once

#include "core/abort_signal.hpp"
#include "engine/stall_monitor.hpp"
#include "engine/work.hpp"

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace concord::detail {

class Negotiator {
 public:
  // `timeout_s` bounds every wait for the other ranks (the transport's deadline,
  // CONCORD_TRANSPORT_TIMEOUT_S; 0 waits forever), plus the `cycle_s` a peer may
  // sleep between cycles: past it cycle() throws ErrorCode::Timeout and this
  // negotiator is unusable. Raised, `abort` (the control communicator's, from
  // Engine::abort) ends every wait, and cycle() throws ErrorCode::Shutdown.
  Negotiator(MPI_Comm control, int rank, int size, StallPolicy stall, double timeout_s,
             double cycle_s, const AbortSignal& abort);
  Negotiator(const Negotiator&) = delete;
  Negotiator& operator=(const Negotiator&) = delete;

  struct Outcome {
    std::vector<std::shared_ptr<Work>> ready;  // the global order
    std::vector<std::pair<std::shared_ptr<Work>, Error>> failed;
    bool shutdown = false;  // some rank asked to shut down: every rank stops
  };

  // One cycle: adds `fresh` work, agrees with the other ranks, returns what runs
  // now. Collective over the control communicator. `give_up_after_s` > 0 bounds
  // the wait for peers (used when shutting down: they may be gone); on expiry
  // the outcome says shutdown. Otherwise a wait past `timeout_s` throws
  // ErrorCode::Timeout (negotiation_timeout()). Once aborted it throws
  // ErrorCode::Shutdown, whether or not it was shutting down.
  Outcome cycle(std::vector<std::shared_ptr<Work>> fresh, bool want_shutdown,
                double give_up_after_s = 0);

 private:
  struct Announcement {
    bool fail = false;  // rank 0: the name timed out, fail it everywhere
    std::string name;
    Signature sig;
  };
  struct Registered {  // a name some ranks announced, the same on every rank
    std::uint64_t order = 0;
    std::vector<std::optional<Signature>> by_rank;
    std::vector<bool> announced() const;  // by rank
  };
  struct CycleBits;  // the reduced cycle vector, by section

  // The steps of one cycle, in the order cycle() runs them (see there).
  void accept(std::vector<std::shared_ptr<Work>> fresh);
  std::vector<std::uint64_t> cached_ready_bits() const;
  std::vector<std::uint64_t> cycle_vector(const std::vector<std::uint64_t>& mine,
                                          bool want_shutdown);
  void diagnose(const std::vector<std::uint64_t>& mine, const CycleBits& bits);
  void settle_cached(const CycleBits& bits, Outcome& out);
  void announce(Outcome& out);
  void watch_registry();

  std::vector<std::uint64_t> exchange_bits(std::vector<std::uint64_t> local, double give_up_after_s,
                                           bool& gave_up);
  std::vector<std::vector<Announcement>> exchange_announcements(
      const std::vector<Announcement>& mine);
  std::vector<std::vector<std::uint64_t>> gather_ready_bits(const std::vector<std::uint64_t>& mine);
  std::optional<std::size_t> cached_id(const Work& work) const;
  // The error of a negotiation wait past the deadline; `call` is the MPI call.
  Error negotiation_timeout(const char* call) const;
  void apply_announcements(const std::vector<std::vector<Announcement>>& all, Outcome& out);
  // Rank 0's stall timeouts of this cycle (`names`), after its other records.
  void fail_timed_out(const std::vector<std::string>& names, Outcome& out);

  // Join (negotiator_join.cpp). A join is announced by name and never cached,
  // so every rank knows, from the same records, which ranks have joined.
  std::vector<bool> joined_ranks() const;  // whose join is registered, by rank
  // Runs registered names that every rank has announced, or every rank that has
  // not joined (allreduces of host tensors: joined ranks add zeros); fails
  // names announced differently; completes the join once all ranks joined.
  // `last_join` is the rank of the last join record applied this cycle (or -1).
  void settle_registry(int last_join, Outcome& out);
  // Whether the registry entry `name` runs now (settle_registry's rule): every rank
  // announced it, or, for an allreduce of host tensors, every rank not `joined`.
  bool complete(const std::string& name, const Registered& entry,
                const std::vector<bool>& joined) const;
  // While some rank has joined: what cannot run with zeros fails, on every rank
  // that submitted it (and leaves the registry, the same on every rank).
  void fail_while_joined(const std::vector<bool>& joined, Outcome& out);
  // A joined rank's ready bit for every cached allreduce of host tensors that
  // no rank is negotiating by name.
  void set_joined_bits(std::uint64_t* all_ready_words) const;
  // Whether this rank has submitted a join that has not completed.
  bool joining() const;
  // On this rank's join: its requests waiting on cache bits are announced by name.
  void announce_held_requests();
  // The work that runs here for `name`: this rank's own, or zeros (joined).
  std::shared_ptr<Work> take_or_fill(const std::string& name, const Signature& sig,
                                     bool announced_here);
  void fail_local(const std::string& name, const Error& error, Outcome& out);
  // Which ranks announced the registry entry `name` (none if it is not there).
  std::vector<bool> announced_by(const std::string& name) const;

  MPI_Comm control_;
  int rank_;
  int size_;
  double timeout_s_;     // as the user set it, for the message
  double wait_limit_s_;  // what a wait allows: timeout_s_ and a cycle; 0: forever
  const AbortSignal& abort_;
  StallMonitor stalls_;

  std::unordered_map<std::string, std::shared_ptr<Work>> pending_;  // this rank's, by name
  std::vector<std::shared_ptr<Work>> to_announce_;
  std::vector<std::pair<std::string, Signature>> cache_;  // id -> (name, signature)
  std::unordered_map<std::string, std::size_t> cache_index_;
  std::map<std::string, Registered> registry_;
  std::uint64_t next_order_ = 0;
};

}  // namespace concord::detail

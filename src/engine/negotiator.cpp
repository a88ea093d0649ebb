#include "engine/negotiator.hpp"

#include "core/mpi_check.hpp"
#include "core/mpi_wait.hpp"
#include "engine/announcement_layout.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace concord::detail {
namespace {

// Word 0 of the cycle vector: flags, combined with OR.
constexpr std::uint64_t kHasAnnouncements = 1;  // someone has names to negotiate in full
constexpr std::uint64_t kShutdown = 2;
constexpr std::uint64_t kDiagnose = 4;  // rank 0 wants everyone's ready bits (stall report)

// Then three sections of W words: AND of ready bits, OR of ready bits, OR of the
// ids rank 0 fails for stalling. The AND section travels inverted (NOT of an OR
// of NOTs), so that MPI's own MPI_BOR combines the whole vector: MPI may apply an
// operation to any piece of the vector (MPICH's ring Iallreduce does), so an op
// of our own could not tell the sections apart by where it is called.
void invert_all_ready(std::vector<std::uint64_t>& vector) {
  const std::size_t words = (vector.size() - 1) / 3;
  for (std::size_t i = 1; i <= words; ++i) vector[i] = ~vector[i];
}

bool test_bit(const std::uint64_t* words, std::size_t id) {
  return ((words[id / 64] >> (id % 64)) & 1u) != 0;
}
void set_bit(std::uint64_t* words, std::size_t id) {
  words[id / 64] |= std::uint64_t{1} << (id % 64);
}

// What every operation fails with once this rank aborted its engine
// (Engine::abort); `when`: "before its next negotiation", ...
Error engine_aborted_error(int rank, const std::string& when) {
  return Error(ErrorCode::Shutdown, rank,
               fmt::format("Engine: this rank aborted the engine (Engine::abort) {}: the engine "
                           "stops, and every pending and later operation fails",
                           when));
}

// Waits for a negotiation request (MPI's `call`) for at most `limit_s` (0:
// forever), polling gently (Patience::Idle: the first exchange waits for the
// slowest rank's next cycle), or until `abort` is raised. Then the request is
// abandoned and `buffers` are kept until exit (keep_until_exit). Returns false
// past the limit; throws engine_aborted_error() on an abort.
template <typename... Buffers>
bool wait_request(MPI_Request& request, double limit_s, const AbortSignal& abort, int rank,
                  const char* call, Buffers&... buffers) {
  const PollResult result =
      poll_until_done([&](int* done) { return MPI_Test(&request, done, MPI_STATUS_IGNORE); },
                      limit_s, Patience::Idle, &abort);
  if (result.timed_out || result.aborted) {
    keep_until_exit(buffers...);
    request = MPI_REQUEST_NULL;
    if (result.aborted) {
      throw engine_aborted_error(
          rank, fmt::format("while its negotiation ({}) waited on the other ranks", call));
    }
    return false;
  }
  check_mpi(result.rc, "MPI_Test", rank);
  return true;
}

// Announcements travel as bytes: fail flag, name, signature fields.
class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
  void put_string(const std::string& s) {
    put(static_cast<std::uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes.insert(bytes.end(), p, p + s.size());
  }
  std::vector<std::byte> bytes;
};

class Reader {
 public:
  Reader(const std::byte* p, std::size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ >= end_; }
  template <typename T>
  T get() {
    T v;
    std::memcpy(&v, p_, sizeof v);
    p_ += sizeof v;
    return v;
  }
  std::string get_string() {
    const auto n = get<std::uint32_t>();
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }

 private:
  const std::byte* p_;
  const std::byte* end_;
};

}  // namespace

Negotiator::Negotiator(MPI_Comm control, int rank, int size, StallPolicy stall, double timeout_s,
                       double cycle_s, const AbortSignal& abort)
    : control_(control),
      rank_(rank),
      size_(size),
      timeout_s_(timeout_s),
      // A live peer may sleep out its cycle time before it enters the next
      // exchange (EngineCore::cycles): that is not silence, so it is added.
      wait_limit_s_(timeout_s > 0 ? timeout_s + cycle_s : 0),
      abort_(abort),
      stalls_(rank, stall) {}

std::optional<std::size_t> Negotiator::cached_id(const Work& work) const {
  auto it = cache_index_.find(work.name);
  if (it == cache_index_.end() || !(cache_[it->second].second == work.sig)) return std::nullopt;
  return it->second;
}

std::vector<bool> Negotiator::Registered::announced() const {
  std::vector<bool> have(by_rank.size());
  for (std::size_t r = 0; r < have.size(); ++r) have[r] = by_rank[r].has_value();
  return have;
}

std::vector<bool> Negotiator::announced_by(const std::string& name) const {
  auto it = registry_.find(name);
  if (it == registry_.end()) return std::vector<bool>(static_cast<std::size_t>(size_), false);
  return it->second.announced();
}

void Negotiator::fail_local(const std::string& name, const Error& error, Outcome& out) {
  auto it = pending_.find(name);
  if (it == pending_.end()) return;
  std::erase(to_announce_, it->second);
  out.failed.emplace_back(it->second, error);
  pending_.erase(it);
}

std::vector<std::uint64_t> Negotiator::exchange_bits(std::vector<std::uint64_t> local,
                                                     double give_up_after_s, bool& gave_up) {
  MPI_Request request = MPI_REQUEST_NULL;
  invert_all_ready(local);
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, local.data(), static_cast<int>(local.size()), MPI_UINT64_T,
                           MPI_BOR, control_, &request),
            "MPI_Iallreduce", rank_);
  // Shutting down, a peer may be gone for good: give up quietly (the engine
  // stops either way). Otherwise the transport's deadline, see negotiation_timeout().
  const double limit = give_up_after_s > 0 ? give_up_after_s : wait_limit_s_;
  gave_up = !wait_request(request, limit, abort_, rank_, "MPI_Iallreduce", local);
  if (gave_up && give_up_after_s <= 0) throw negotiation_timeout("MPI_Iallreduce");
  if (!gave_up) invert_all_ready(local);  // given up, the vector went to keep_until_exit
  return local;
}

// Why the transport's deadline (plus one cycle) fits every negotiation wait, the
// first exchange of a cycle included: every rank's engine thread cycles at least
// every cycle time, or its idle pace, whether or not its application submits
// anything (EngineCore::wait_for_next_cycle), so the exchanges never wait for the
// application (a validation pass, a checkpoint, a slow input pipeline). A live
// peer enters the next exchange once it has slept out its cycle (added to the
// limit) and
// finished its part of the last cycle's collectives, which every rank runs
// together, message by message, under the same deadline in the transport; the
// later exchanges of a cycle follow the first at once. So on a live job every
// wait ends in about a cycle, and only a peer that is dead, stopped or behind a
// dead link reaches the limit. A collective cannot say which peer it waits on:
// the error names every other rank.
Error Negotiator::negotiation_timeout(const char* call) const {
  // Named up to kNamed (each name asks MPI for the peer's world rank), then counted.
  constexpr std::size_t kNamed = 8;
  const auto others = static_cast<std::size_t>(size_ - 1);
  std::vector<std::string> peers;
  for (int r = 0; r < size_ && peers.size() < kNamed; ++r) {
    if (r != rank_) peers.push_back(describe_peer(control_, r));
  }
  std::string waiting_on;
  if (others == 1) {
    waiting_on = fmt::format("{} in the engine's negotiation ({})", peers[0], call);
  } else {
    const std::size_t more = others - peers.size();
    waiting_on = fmt::format("the engine's negotiation ({}) with {}{} (any of them)", call,
                             fmt::join(peers, ", "),
                             more > 0 ? fmt::format(" and {} more ranks", more) : "");
  }
  return timeout_error(rank_, timeout_s_, waiting_on,
                       "the engine stops and every pending and later operation fails");
}

std::vector<std::vector<std::uint64_t>> Negotiator::gather_ready_bits(
    const std::vector<std::uint64_t>& mine) {
  const std::size_t words = mine.size();
  std::vector<std::uint64_t> all(words * static_cast<std::size_t>(size_));
  std::copy(mine.begin(), mine.end(),
            all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(rank_) * words));
  MPI_Request request = MPI_REQUEST_NULL;
  // In place: the one buffer MPI touches is ours to keep if the wait times out.
  check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), static_cast<int>(words),
                           MPI_UINT64_T, control_, &request),
            "MPI_Iallgather", rank_);
  if (!wait_request(request, wait_limit_s_, abort_, rank_, "MPI_Iallgather", all)) {
    throw negotiation_timeout("MPI_Iallgather");
  }
  std::vector<std::vector<std::uint64_t>> by_rank(static_cast<std::size_t>(size_));
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    by_rank[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * words),
                      all.begin() + static_cast<std::ptrdiff_t>((r + 1) * words));
  }
  return by_rank;
}

std::vector<std::vector<Negotiator::Announcement>> Negotiator::exchange_announcements(
    const std::vector<Announcement>& mine) {
  Writer w;
  for (const Announcement& a : mine) {
    w.put(static_cast<std::uint8_t>(a.fail));
    w.put_string(a.name);
    w.put(a.sig);
  }
  // The sizes travel in 64 bits, so every rank learns them whole, and each rank checks
  // alike that they fit the int counts of the exchange (announcement_layout).
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
  sizes[static_cast<std::size_t>(rank_)] = w.bytes.size();
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, sizes.data(), 1, MPI_UINT64_T,
                           control_, &request),
            "MPI_Iallgather", rank_);
  if (!wait_request(request, wait_limit_s_, abort_, rank_, "MPI_Iallgather", sizes)) {
    throw negotiation_timeout("MPI_Iallgather");
  }
  AnnouncementLayout layout = announcement_layout(sizes, rank_);
  std::vector<int>& counts = layout.counts;
  std::vector<int>& displs = layout.displacements;
  std::vector<std::byte> all(layout.total);
  check_mpi(MPI_Iallgatherv(w.bytes.data(), counts[static_cast<std::size_t>(rank_)], MPI_BYTE,
                            all.data(), counts.data(), displs.data(), MPI_BYTE, control_, &request),
            "MPI_Iallgatherv", rank_);
  if (!wait_request(request, wait_limit_s_, abort_, rank_, "MPI_Iallgatherv", w.bytes, all, counts,
                    displs)) {
    throw negotiation_timeout("MPI_Iallgatherv");
  }

  std::vector<std::vector<Announcement>> by_rank(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r) {
    Reader in(all.data() + displs[r], static_cast<std::size_t>(counts[r]));
    while (!in.done()) {
      Announcement a;
      a.fail = in.get<std::uint8_t>() != 0;
      a.name = in.get_string();
      a.sig = in.get<Signature>();
      by_rank[r].push_back(std::move(a));
    }
  }
  return by_rank;
}

void Negotiator::apply_announcements(const std::vector<std::vector<Announcement>>& all,
                                     Outcome& out) {
  std::vector<std::string> touched;
  std::vector<std::string> timed_out;
  int last_join = -1;
  for (std::size_t r = 0; r < all.size(); ++r) {
    for (const Announcement& a : all[r]) {
      if (!a.fail && a.sig.kind == WorkKind::Join) last_join = static_cast<int>(r);
      if (a.fail) {  // rank 0's monitor timed the name out: decided below
        timed_out.push_back(a.name);
        continue;
      }
      auto [it, inserted] = registry_.try_emplace(a.name);
      if (inserted) {
        it->second.order = next_order_++;
        it->second.by_rank.resize(static_cast<std::size_t>(size_));
      }
      it->second.by_rank[r] = a.sig;
      touched.push_back(a.name);
    }
  }

  fail_timed_out(timed_out, out);
  settle_registry(last_join, out);

  // A name someone announced that this rank holds as a cached request (its
  // signature changed elsewhere): announce it too, so the difference shows.
  // (Work submitted after this cycle is announced by cycle() for the same reason.)
  for (const std::string& name : touched) {
    auto reg = registry_.find(name);
    auto it = pending_.find(name);
    if (reg == registry_.end() || it == pending_.end() || it->second->announced) continue;
    it->second->announced = true;
    to_announce_.push_back(it->second);
  }
}

// Rank 0's stall timeouts apply once every record of their cycle has: a rank it
// waited for may have announced the name in this very cycle. If that completed it,
// it runs on every rank (as a cached id ready everywhere runs, whatever rank 0
// decided). Otherwise it leaves the registry and every rank's request fails, this
// cycle's late ones too, naming the ranks still missing. (Applied before the other
// records, a late rank's handle failed and its record then made a new entry that
// held no work: the others' next submission ran without it, and hung.)
void Negotiator::fail_timed_out(const std::vector<std::string>& names, Outcome& out) {
  if (names.empty()) return;
  const std::vector<bool> joined = joined_ranks();
  for (const std::string& name : names) {
    auto it = registry_.find(name);
    // Gone already: its requests completed or failed (fail_while_joined).
    if (it == registry_.end() || complete(name, it->second, joined)) continue;
    const std::vector<bool> have = it->second.announced();
    registry_.erase(it);
    fail_local(name, stalls_.name_timeout(name, have), out);
  }
}

// The reduced cycle vector (exchange_bits), by section; W words each.
struct Negotiator::CycleBits {
  std::uint64_t flags;
  const std::uint64_t* all_ready;  // AND: ready on every rank, runs now
  const std::uint64_t* any_ready;  // OR: ready somewhere (stalled unless all_ready)
  const std::uint64_t* to_fail;    // rank 0's monitor timed these ids out
};

// Every rank runs the same collectives in the same order, or they deadlock: the
// bit exchange always; then the ready-bit gather and the announcement exchange
// only when the reduced flags, the same on every rank, ask for them. Everything
// else is local and reads only what every rank holds alike.
Negotiator::Outcome Negotiator::cycle(std::vector<std::shared_ptr<Work>> fresh, bool want_shutdown,
                                      double give_up_after_s) {
  // An exchange that completes at once never polls the flag: checked here too.
  if (abort_.raised()) throw engine_aborted_error(rank_, "before its next negotiation");
  Outcome out;
  accept(std::move(fresh));
  fail_while_joined(joined_ranks(), out);

  const std::vector<std::uint64_t> mine = cached_ready_bits();
  bool gave_up = false;
  const std::vector<std::uint64_t> reduced =
      exchange_bits(cycle_vector(mine, want_shutdown), give_up_after_s, gave_up);
  if (gave_up || (reduced[0] & kShutdown) != 0) {
    out.shutdown = true;
    return out;
  }
  const std::size_t words = mine.size();
  const CycleBits bits{reduced[0], reduced.data() + 1, reduced.data() + 1 + words,
                       reduced.data() + 1 + 2 * words};

  if ((bits.flags & kDiagnose) != 0) diagnose(mine, bits);
  settle_cached(bits, out);
  if ((bits.flags & kHasAnnouncements) != 0) announce(out);
  watch_registry();
  return out;
}

void Negotiator::accept(std::vector<std::shared_ptr<Work>> fresh) {
  for (auto& w : fresh) {
    pending_[w->name] = w;
    if (w->sig.kind == WorkKind::Join) announce_held_requests();
    // Announced by name when it is new or its signature changed here, and also
    // when some rank has announced it already (registry_, the same on every
    // rank): that rank waits for everyone's announcement, not for cache bits,
    // so this one must announce too, or the difference would never show. A
    // rank that joins negotiates by name too (negotiator_join.cpp says why).
    if (!cached_id(*w) || registry_.contains(w->name) || joining()) {
      w->announced = true;
      to_announce_.push_back(w);
    }
  }
}

// This rank's ready bit per cache id: work waiting by name is not in it (it
// waits for everyone's announcement instead).
std::vector<std::uint64_t> Negotiator::cached_ready_bits() const {
  std::vector<std::uint64_t> mine((cache_.size() + 63) / 64, 0);
  for (const auto& [name, w] : pending_) {
    if (w->announced) continue;
    if (auto id = cached_id(*w)) set_bit(mine.data(), *id);
  }
  return mine;
}

// What this rank contributes to the bit exchange: flags, then its ready bits
// in the AND and OR sections, then (rank 0) the ids its monitor fails. Rank 0's
// stall decisions of the last cycle reach every rank here; the other ranks'
// monitors never have any.
std::vector<std::uint64_t> Negotiator::cycle_vector(const std::vector<std::uint64_t>& mine,
                                                    bool want_shutdown) {
  const std::size_t words = mine.size();
  std::vector<std::uint64_t> local(1 + 3 * words, 0);
  std::uint64_t& flags = local[0];
  if (!to_announce_.empty()) flags |= kHasAnnouncements;
  if (want_shutdown) flags |= kShutdown;
  std::copy(mine.begin(), mine.end(), local.begin() + 1);
  std::copy(mine.begin(), mine.end(), local.begin() + 1 + static_cast<std::ptrdiff_t>(words));
  set_joined_bits(local.data() + 1);  // AND section only: no stall reports for zeros
  if (stalls_.take_diagnose_request()) flags |= kDiagnose;
  if (stalls_.has_names_to_fail()) flags |= kHasAnnouncements;  // they travel as announcements
  for (std::size_t id : stalls_.take_ids_to_fail()) set_bit(local.data() + 1 + 2 * words, id);
  return local;
}

// Rank 0 asked for a diagnosis: the OR says an id is pending somewhere, not
// where, so every rank gathers everyone's ready bits and the monitor learns
// which ranks are missing (for rank 0's warning, and every rank's timeout error).
void Negotiator::diagnose(const std::vector<std::uint64_t>& mine, const CycleBits& bits) {
  const auto by_rank = gather_ready_bits(mine);
  for (std::size_t id = 0; id < cache_.size(); ++id) {
    if (!test_bit(bits.any_ready, id) || test_bit(bits.all_ready, id)) continue;
    std::vector<bool> have(static_cast<std::size_t>(size_));
    for (std::size_t r = 0; r < have.size(); ++r) have[r] = test_bit(by_rank[r].data(), id);
    stalls_.diagnosed(id, cache_[id].first, have);
  }
}

// Cached ids in id order (the same on every rank): ready everywhere runs, timed
// out fails, ready somewhere stays under rank 0's watch.
void Negotiator::settle_cached(const CycleBits& bits, Outcome& out) {
  for (std::size_t id = 0; id < cache_.size(); ++id) {
    const std::string& name = cache_[id].first;
    if (test_bit(bits.all_ready, id)) {
      out.ready.push_back(take_or_fill(name, cache_[id].second, false));
      stalls_.id_settled(id);
    } else if (test_bit(bits.to_fail, id)) {
      fail_local(name, stalls_.id_timeout(id, name), out);
      stalls_.id_settled(id);
    } else if (test_bit(bits.any_ready, id)) {
      stalls_.id_pending(id);
    } else {
      stalls_.id_settled(id);
    }
  }
}

// The full negotiation: this rank's new or changed names, and on rank 0 the
// names its monitor timed out (they fail everywhere as the records are applied).
void Negotiator::announce(Outcome& out) {
  std::vector<Announcement> mine;
  for (const auto& w : to_announce_) mine.push_back({false, w->name, w->sig});
  for (std::string& name : stalls_.take_names_to_fail()) {
    mine.push_back({true, std::move(name), {}});
  }
  to_announce_.clear();
  apply_announcements(exchange_announcements(mine), out);
}

// Rank 0's monitor watches the names some ranks announced and others have not
// (what is left in the registry once the cycle's announcements are applied).
void Negotiator::watch_registry() {
  if (!stalls_.decides()) return;
  std::vector<StallMonitor::AnnouncedName> names;
  names.reserve(registry_.size());
  for (const auto& [name, entry] : registry_) {
    names.push_back({entry.order, name, entry.announced()});
  }
  stalls_.watch_names(names);
}

}  // namespace concord::detail

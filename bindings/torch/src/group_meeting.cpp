// The members of a new subgroup meet with the group's timeout before
// MPI_Comm_create_group (group_meeting.hpp). Every other member sends the first
// member its arrival, numbered by a count of its own (a nonce) and naming the
// meeting (a hash of the member list), and waits for the answer to that
// arrival. The first member waits for all of them until the timeout, then
// tells each member that came which members did not: none, and the group goes
// ahead into MPI_Comm_create_group, where every member is then known to be.
//
// Words are read from the meeting's members only (the first member reads each
// other member; the others read the first), so that a word from a rank outside
// the group, meant for a group made later, waits for that meeting. An arrival
// for another meeting, read by a first member from a member that has not come
// to this meeting, means that the two make their common groups in different
// orders: the first member answers it at once that it is making another group,
// so that the two fail instead of going into MPI_Comm_create_group for
// different groups, where both would hang. From a member that came to this
// meeting and left it (its timeout ran out; read here, or in an earlier
// meeting that read ahead), it is kept for the later meeting. An arrival for a
// meeting the reader was first of and gave up on is answered that it did.
// A member that is not the first cannot tell these apart while it waits (the
// arrivals it would need went to the first member): once told who did not
// come, it answers their arrivals for its later meetings in the same way.
#include "group_meeting.hpp"

#include "meeting_post.hpp"

#include <concord/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace concord_torch {

namespace {

using meeting::Backoff;
using meeting::Deadline;
using meeting::Sends;
using meeting::Word;

// How much longer than the timeout a member waits for the first member's
// verdict: the first member's timeout starts when it comes, which may be later
// than this member's, and its verdict names the absent. Past it, the member
// fails without one.
constexpr std::chrono::seconds kVerdictGrace{1};
// Rank lists longer than this are shortened in messages.
constexpr std::size_t kRanksShown = 16;

// Each word leads with its kind:
//   a member to the first:  {kArrive, nonce, meeting}, {kWithdraw, nonce, meeting}
//   the first to a member:  {kVerdict, nonce, meeting, then Absence's three lists}
//                           {kOtherGroup, nonce, its own meeting, n, its n members}
//                           {kTooLate, nonce, meeting}: it gave up on that one
enum Kind : std::int64_t {
  kArrive = 1,
  kWithdraw = 2,
  kVerdict = 3,
  kOtherGroup = 4,
  kTooLate = 5
};

// The meeting's name in every word: FNV-1a over the member list, so that
// groups of different members are told apart (groups of the same members are
// not; their first member is the same, and their words alike).
std::int64_t meeting_id(const std::vector<int>& members) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const int rank : members) {
    hash = (hash ^ static_cast<std::uint32_t>(rank)) * 1099511628211ULL;
  }
  return static_cast<std::int64_t>(hash);
}

// The messages' text, by hand, not with fmt as src/ does: torch's headers
// bring their own fmt, another version than the one concord links.

// "0, 2, 3"; a long list shortened to its first and last ranks and its length.
std::string joined(const std::vector<int>& ranks) {
  const auto text_of = [&](std::size_t from, std::size_t to) {
    std::string text;
    for (std::size_t i = from; i < to; ++i) {
      text += (i > from ? ", " : "") + std::to_string(ranks[i]);
    }
    return text;
  };
  if (ranks.size() <= kRanksShown) return text_of(0, ranks.size());
  return text_of(0, kRanksShown / 2) + ", ..., " + text_of(ranks.size() - 2, ranks.size()) + " (" +
         std::to_string(ranks.size()) + " in all)";
}

std::string ranks_text(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + joined(ranks);
}

std::string seconds_text(double timeout_s) {
  std::string text = std::to_string(timeout_s);  // "2.500000"
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

std::string group_text(const std::string& group_name, const std::vector<int>& members) {
  return "torch.distributed process group '" + group_name + "' of world ranks [" + joined(members) +
         "]";
}

// The list of ranks at `at` in `word` (its length first, then the ranks), and
// the index after it; cut short where the word is.
std::pair<std::vector<int>, std::size_t> ranks_in(const Word& word, std::size_t at) {
  std::vector<int> ranks;
  if (at >= word.size()) return {ranks, word.size()};
  const std::int64_t count = word[at];
  std::size_t i = at + 1;
  for (std::int64_t n = 0; n < count && i < word.size(); ++n, ++i) {
    ranks.push_back(static_cast<int>(word[i]));
  }
  return {ranks, i};
}

struct Meeting {
  MPI_Comm world;
  const std::vector<int>& members;
  int world_rank;
  std::string what;  // "torch.distributed process group '3' of world ranks [0, 2]"
  double timeout_s;
  std::int64_t id;
};

[[noreturn]] void fail_meeting(const Meeting& m, const std::string& why,
                               concord::ErrorCode code = concord::ErrorCode::Timeout) {
  throw concord::Error(code, m.world_rank,
                       m.what + ": " + why +
                           "; the group is not made, and a member that comes later fails too: "
                           "end the job, as after a collective's timeout");
}

// Who the first member counted missing: `absent` never came; `gave_up` came
// before the first member did and withdrew, and did not come again;
// `elsewhere` came to make another group instead (and was told so).
struct Absence {
  std::vector<int> absent;
  std::vector<int> gave_up;
  std::vector<int> elsewhere;
  bool empty() const { return absent.empty() && gave_up.empty() && elsewhere.empty(); }
  // The verdict's lists, each its length and then its ranks.
  void append_to(Word& word) const {
    for (const std::vector<int>* list : {&absent, &gave_up, &elsewhere}) {
      word.push_back(static_cast<std::int64_t>(list->size()));
      word.insert(word.end(), list->begin(), list->end());
    }
  }
  static Absence read_from(const Word& word, std::size_t at) {
    Absence absence;
    for (std::vector<int>* list : {&absence.absent, &absence.gave_up, &absence.elsewhere}) {
      std::tie(*list, at) = ranks_in(word, at);
    }
    return absence;
  }
};

// The failure for `absence`; `counted_by` says who counted where that is not
// this rank ("" here).
[[noreturn]] void fail_for_absent(const Meeting& m, const Absence& absence,
                                  const std::string& counted_by) {
  const std::string within =
      " within " + seconds_text(m.timeout_s) + " (the group's timeout" + counted_by + ")";
  const std::string first = "rank " + std::to_string(m.members.front());
  std::vector<std::string> parts;
  if (!absence.absent.empty()) {
    parts.push_back(ranks_text(absence.absent) + " did not come to make it" + within);
  }
  if (!absence.gave_up.empty()) {
    parts.push_back(ranks_text(absence.gave_up) + " came more than " +
                    seconds_text(static_cast<double>(kVerdictGrace.count())) + " before " + first +
                    " (the group's first member) did, gave up waiting for its word, and did not "
                    "come again" +
                    within);
  }
  if (!absence.elsewhere.empty()) {
    parts.push_back(ranks_text(absence.elsewhere) +
                    " came to make another group instead (new_group "
                    "calls in another order than " +
                    first + "'s) and not this one" + within);
  }
  std::string why;
  for (const std::string& part : parts) why += (why.empty() ? "" : "; ") + part;
  fail_meeting(m, why);
}

// What one rank reads from another in a meeting: the other's arrival for this
// meeting (standing unless withdrawn), and an arrival for a meeting the reader
// will be first of, answered or kept for that meeting (the file's comment).
struct Words {
  explicit Words(int from) : rank(from) {}
  int rank;
  std::optional<std::int64_t> arrival;  // its nonce
  bool withdrew = false;                // an arrival for this meeting, withdrawn
  Word other_arrival;                   // for another meeting, not withdrawn (empty: none)
  bool told_other = false;              // answered that this rank makes another
  Word answer;                          // to this rank's own arrival (empty: none)

  // Reads everything that has come from `rank` (up to an answer); `nonce` is
  // this rank's own arrival's (0: none, on the first member). Whether any came.
  bool read(const Meeting& m, std::int64_t nonce) {
    bool came = false;
    while (answer.empty()) {
      auto word = meeting::receive_now(rank, m.world, m.world_rank);
      if (!word) break;
      take(std::move(*word), m.id, nonce);
      came = true;
    }
    return came;
  }
  // A word that is neither a member's nor the answer to `nonce` answers an
  // arrival this rank gave up on: dropped.
  void take(Word word, std::int64_t id, std::int64_t nonce) {
    if (word.size() == 3 && word[0] == kArrive) {
      if (word[2] == id) {
        arrival = word[1];
        withdrew = false;
      } else {
        other_arrival = std::move(word);
      }
    } else if (word.size() == 3 && word[0] == kWithdraw) {
      if (arrival == word[1]) {
        arrival.reset();
        withdrew = true;
        meeting::note_left(rank, id);
      }
      if (!other_arrival.empty() && other_arrival[1] == word[1]) {
        meeting::note_left(rank, other_arrival[2]);
        other_arrival.clear();
      }
    } else if (nonce != 0 && word.size() >= 3 && word[1] == nonce && word[2] == id &&
               (word[0] == kVerdict || word[0] == kTooLate)) {
      answer = std::move(word);
    } else if (nonce != 0 && word.size() >= 4 && word[1] == nonce && word[0] == kOtherGroup) {
      answer = std::move(word);
    }
  }
  // A standing arrival for another meeting: for one this rank gave up on, told
  // so; from a rank that came to this meeting and left it, kept for later;
  // else told which group this rank is making now (it called out of turn).
  void answer_other_arrival(const Meeting& m, Sends& sends) {
    if (other_arrival.empty()) return;
    if (meeting::gave_up_on(other_arrival[2])) {
      sends.post({kTooLate, other_arrival[1], other_arrival[2]}, rank);
      other_arrival.clear();
      return;
    }
    if (meeting::has_left(rank, m.id)) return;
    Word reply{kOtherGroup, other_arrival[1], m.id, static_cast<std::int64_t>(m.members.size())};
    reply.insert(reply.end(), m.members.begin(), m.members.end());
    sends.post(std::move(reply), rank);
    other_arrival.clear();
    told_other = true;
  }
};

// At the end of a meeting, however it ends: the arrivals read for a later
// meeting go back to be read by it.
struct KeepForLater {
  explicit KeepForLater(std::vector<Words>& w) : words(w) {}
  std::vector<Words>& words;
  KeepForLater(const KeepForLater&) = delete;
  KeepForLater& operator=(const KeepForLater&) = delete;
  ~KeepForLater() {
    for (Words& w : words) {
      if (!w.other_arrival.empty()) meeting::keep_for_later(w.rank, std::move(w.other_arrival));
    }
  }
};

// The first member: reads the others' words until each has an arrival standing
// or the timeout passes, then everything they have sent by now (a withdrawal
// after the arrival, perhaps); then tells each that came who did not.
void gather_arrivals(const Meeting& m) {
  std::vector<Words> others;
  for (std::size_t i = 1; i < m.members.size(); ++i) {
    others.emplace_back(m.members[i]);
    others.back().withdrew = meeting::has_left(m.members[i], m.id);  // read in another meeting
  }
  const KeepForLater keep(others);
  meeting::note_given_up(m.id, false);  // held again
  const Deadline deadline = meeting::deadline_after(m.timeout_s);
  Sends sends(m.world, m.world_rank);
  Backoff backoff;
  for (bool all_here = false; !all_here;) {
    all_here = true;
    bool heard = false;
    for (Words& other : others) {
      heard |= other.read(m, 0);
      other.answer_other_arrival(m, sends);
      all_here &= other.arrival.has_value();
    }
    if (all_here || meeting::passed(deadline)) break;
    if (heard) backoff.reset();
    backoff.wait();
  }
  Absence absence;
  for (Words& other : others) {
    other.read(m, 0);  // a withdrawal since, perhaps
    other.answer_other_arrival(m, sends);
    if (other.arrival) continue;
    auto& list = other.told_other ? absence.elsewhere
                 : other.withdrew ? absence.gave_up
                                  : absence.absent;
    list.push_back(other.rank);
  }
  for (const Words& other : others) {
    if (!other.arrival) continue;
    Word verdict{kVerdict, *other.arrival, m.id};
    absence.append_to(verdict);
    sends.post(std::move(verdict), other.rank);
  }
  if (absence.empty()) {
    meeting::forget_left(m.members, m.id);  // each came to this one
    return;
  }
  meeting::note_given_up(m.id, true);
  fail_for_absent(m, absence, "");
}

std::int64_t next_nonce() {
  static std::atomic<std::int64_t> count{0};
  return ++count;
}

// The first member's answer to arrival `nonce`, if it comes by `deadline`
// (else empty).
Word answer_by(const Meeting& m, std::int64_t nonce, Deadline deadline) {
  std::vector<Words> first;
  first.emplace_back(m.members.front());
  const KeepForLater keep(first);  // its arrival for a group this rank is first of
  Backoff backoff;
  for (;;) {
    const bool last = meeting::passed(deadline);  // then one more read, after the deadline
    const bool came = first[0].read(m, nonce);
    if (!first[0].answer.empty() || last) return std::move(first[0].answer);
    if (came) backoff.reset();
    backoff.wait();
  }
}

// After a verdict naming `absent`: an arrival that one of them sent this rank
// for a group it is first of was sent out of turn (it never came here), and is
// told so (Words::answer_other_arrival); what else was read with it (its
// withdrawals, stale answers to this rank's own arrivals) is done with.
void answer_the_absent(const Meeting& m, const std::vector<int>& absent, Sends& sends) {
  std::vector<Words> others;
  for (const int rank : absent) others.emplace_back(rank);
  const KeepForLater keep(others);
  for (Words& other : others) {
    other.read(m, 0);
    other.answer_other_arrival(m, sends);
  }
}

// Any other member: sends its arrival, then waits for the answer to it.
void await_verdict(const Meeting& m) {
  const int first = m.members.front();
  const std::int64_t nonce = next_nonce();
  Sends sends(m.world, m.world_rank);
  sends.post({kArrive, nonce, m.id}, first);
  Word answer;
  try {
    answer = answer_by(m, nonce, meeting::deadline_after(m.timeout_s, kVerdictGrace));
  } catch (...) {
    sends.post_quietly({kWithdraw, nonce, m.id}, first);  // an MPI call failed
    throw;
  }
  const std::string first_text = "rank " + std::to_string(first) + ", its first member,";
  if (answer.empty()) {
    sends.post({kWithdraw, nonce, m.id}, first);
    fail_meeting(m, first_text + " did not say within " +
                        seconds_text(m.timeout_s + static_cast<double>(kVerdictGrace.count())) +
                        " (the group's timeout and a grace of " +
                        seconds_text(static_cast<double>(kVerdictGrace.count())) +
                        ") that every member came (it may not have come itself)");
  }
  if (answer[0] == kTooLate) {
    fail_meeting(m, first_text +
                        " had given up on it before this rank's arrival reached it (at its own "
                        "timeout of " +
                        seconds_text(m.timeout_s) + ")");
  }
  if (answer[0] == kOtherGroup) {
    fail_meeting(m,
                 first_text + " is making the group of world ranks [" +
                     joined(ranks_in(answer, 3).first) +
                     "] now, not this one: every rank that two groups share must call new_group "
                     "for them in the same order",
                 concord::ErrorCode::Mismatch);
  }
  const Absence absence = Absence::read_from(answer, 3);
  answer_the_absent(m, absence.absent, sends);
  if (!absence.empty())
    fail_for_absent(m, absence, ", as rank " + std::to_string(first) + " counted it");
}

}  // namespace

void meet_group_members(MPI_Comm world, const std::vector<int>& members, int world_rank,
                        const std::string& group_name, double timeout_s) {
  if (members.size() < 2) return;
  const Meeting meeting{
      world, members, world_rank, group_text(group_name, members), timeout_s, meeting_id(members)};
  if (world_rank == members.front()) {
    gather_arrivals(meeting);
  } else {
    await_verdict(meeting);
  }
}

}  // namespace concord_torch

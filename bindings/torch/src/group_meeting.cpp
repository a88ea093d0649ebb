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
// the group, meant for a group made later, waits for that meeting. A member's
// arrival for another meeting than the one its reader is in now can only mean
// that the two make their common groups in different orders (or that it gave
// up on that meeting, and its withdrawal follows): the reader answers it at
// once that it is making another group, so that the two fail instead of going
// into MPI_Comm_create_group for different groups, where both would hang.
#include "group_meeting.hpp"

#include <concord/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace concord_torch {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;  // nullopt: for ever
using Word = std::vector<std::int64_t>;

// How much longer than the timeout a member waits for the first member's
// verdict: the first member's timeout starts when it comes, which may be later
// than this member's, and its verdict names the absent. Past it, the member
// fails without one.
constexpr std::chrono::seconds kVerdictGrace{1};
// Polling for words backs off from the first interval to the longest: short
// beside a group's set-up while the others are arriving, and no spinning of a
// core that other ranks on the node may need while one is late.
constexpr std::chrono::microseconds kFirstPoll{20};
constexpr std::chrono::microseconds kLongestPoll{1000};
// Rank lists longer than this are shortened in messages.
constexpr std::size_t kRanksShown = 16;

// Each word leads with its kind:
//   a member to the first:  {kArrive, nonce, meeting}, {kWithdraw, nonce, meeting}
//   the first to a member:  {kVerdict, nonce, meeting, then Absence's three lists}
//                           {kOtherGroup, nonce, its own meeting, n, its n members}
enum Kind : std::int64_t { kArrive = 1, kWithdraw = 2, kVerdict = 3, kOtherGroup = 4 };

Deadline deadline_after(double timeout_s, Clock::duration extra = {}) {
  // Past a century (beyond what the clock's nanoseconds can count, from about
  // 292 years): for ever.
  if (timeout_s <= 0 || timeout_s > 100 * 365.25 * 86400) return std::nullopt;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s)) +
         extra;
}

bool passed(const Deadline& deadline) {
  return deadline && Clock::now() >= *deadline;
}

class Backoff {
 public:
  void reset() { next_ = kFirstPoll; }
  void wait() {
    std::this_thread::sleep_for(next_);
    next_ = std::min(next_ * 2, kLongestPoll);
  }

 private:
  std::chrono::microseconds next_{kFirstPoll};
};

void check_call(int rc, int world_rank, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw concord::Error(concord::ErrorCode::MpiError, world_rank,
                         std::string(call) + " failed in the meeting before a process group");
  }
}

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

// A meeting's sends: each buffer is kept until its send completes. At the end
// of the meeting they are given a grace to complete; what is left then (a
// member gone that never takes it) goes on in MPI, which may still read the
// buffer, so the buffer is kept for the process's life (a few bytes, on a path
// that ends the job).
class Sends {
 public:
  Sends(MPI_Comm world, int world_rank) : world_(world), world_rank_(world_rank) {}
  Sends(const Sends&) = delete;
  Sends& operator=(const Sends&) = delete;
  ~Sends() {
    const Clock::time_point until = Clock::now() + kVerdictGrace;
    Backoff backoff;
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      int done = 0;
      while (MPI_Test(&requests_[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
             Clock::now() < until) {
        backoff.wait();
      }
      if (!done && requests_[i] != MPI_REQUEST_NULL) {
        MPI_Request_free(&requests_[i]);
        static_cast<void>(buffers_[i].release());
      }
    }
  }
  void post(Word word, int to) {
    buffers_.push_back(std::make_unique<Word>(std::move(word)));
    requests_.push_back(MPI_REQUEST_NULL);
    const Word& buffer = *buffers_.back();
    const int rc = MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_INT64_T, to,
                             kMeetingTag, world_, &requests_.back());
    if (rc != MPI_SUCCESS) requests_.back() = MPI_REQUEST_NULL;  // undefined after a failure
    check_call(rc, world_rank_, "MPI_Isend");
  }
  // On a path that is failing already: a send that fails too is left out.
  void post_quietly(Word word, int to) noexcept {
    try {
      post(std::move(word), to);
    } catch (...) {
      // The failure on its way says more than this one would.
    }
  }

 private:
  MPI_Comm world_;
  int world_rank_;
  std::vector<std::unique_ptr<Word>> buffers_;
  std::vector<MPI_Request> requests_;
};

// The next word from `from` if one has come (matched by a probe, so nothing is
// left pending when none has: no receive to cancel).
std::optional<Word> receive_now(int from, MPI_Comm world, int world_rank) {
  int found = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_call(MPI_Improbe(from, kMeetingTag, world, &found, &message, &status), world_rank,
             "MPI_Improbe");
  if (!found) return std::nullopt;
  int count = 0;
  check_call(MPI_Get_count(&status, MPI_INT64_T, &count), world_rank, "MPI_Get_count");
  Word word(static_cast<std::size_t>(count));
  check_call(MPI_Mrecv(word.data(), count, MPI_INT64_T, &message, MPI_STATUS_IGNORE), world_rank,
             "MPI_Mrecv");
  return word;
}

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
// meeting (standing unless withdrawn) and an arrival for any other, which the
// reader answers as soon as it has read what else has come from that rank.
struct Words {
  explicit Words(int from) : rank(from) {}
  int rank;
  std::optional<std::int64_t> arrival;        // its nonce
  bool withdrew = false;                      // an arrival for this meeting, withdrawn
  std::optional<std::int64_t> other_arrival;  // for another meeting, not withdrawn
  bool told_other = false;                    // answered that this rank makes another
  std::optional<Word> answer;                 // to this rank's own arrival

  // Reads everything that has come from `rank` (up to an answer); `nonce` is
  // this rank's own arrival's (0: none, on the first member). Whether any came.
  bool read(const Meeting& m, std::int64_t nonce) {
    bool came = false;
    while (!answer) {
      auto word = receive_now(rank, m.world, m.world_rank);
      if (!word) break;
      take(std::move(*word), m.id, nonce);
      came = true;
    }
    return came;
  }
  // A word that is neither a member's nor the answer to `nonce` answers an
  // arrival this rank gave up on: dropped.
  void take(Word word, std::int64_t id, std::int64_t nonce) {
    const bool member_word = word.size() == 3 && (word[0] == kArrive || word[0] == kWithdraw);
    if (member_word && word[0] == kArrive) {
      (word[2] == id ? arrival : other_arrival) = word[1];
      if (word[2] == id) withdrew = false;
    } else if (member_word) {
      if (arrival == word[1]) {
        arrival.reset();
        withdrew = true;
      }
      if (other_arrival == word[1]) other_arrival.reset();
    } else if (nonce != 0 && word.size() >= 4 && word[1] == nonce &&
               (word[0] == kOtherGroup || (word[0] == kVerdict && word[2] == id))) {
      answer = std::move(word);
    }
  }
  // Tells the rank of a standing arrival for another meeting which group this
  // rank is making now.
  void answer_other_arrival(const Meeting& m, Sends& sends) {
    if (!other_arrival) return;
    Word reply{kOtherGroup, *other_arrival, m.id, static_cast<std::int64_t>(m.members.size())};
    reply.insert(reply.end(), m.members.begin(), m.members.end());
    sends.post(std::move(reply), rank);
    other_arrival.reset();
    told_other = true;
  }
};

// The first member: reads the others' words until each has an arrival standing
// or the timeout passes, then everything they have sent by now (a withdrawal
// after the arrival, perhaps); then tells each that came who did not.
void gather_arrivals(const Meeting& m) {
  std::vector<Words> others;
  for (std::size_t i = 1; i < m.members.size(); ++i) others.emplace_back(m.members[i]);
  const Deadline deadline = deadline_after(m.timeout_s);
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
    if (all_here || passed(deadline)) break;
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
  if (!absence.empty()) fail_for_absent(m, absence, "");
}

std::int64_t next_nonce() {
  static std::atomic<std::int64_t> count{0};
  return ++count;
}

// The first member's answer to arrival `nonce`, if it comes by `deadline`.
// Meanwhile the other members are read too: an arrival from one of them (or
// from the first member itself) is for a group this rank is first of, never for
// this meeting, so they make their groups in another order (or it gave up on
// that one): it is told at once that this rank is making this group. No word
// for a group made after this one can come meanwhile: a member goes on to one
// only once this group is made, which MPI_Comm_create_group and the engine's
// set-up (an MPI_Comm_idup) hold back until every member has left its meeting.
std::optional<Word> answer_by(const Meeting& m, std::int64_t nonce, Deadline deadline,
                              Sends& sends) {
  std::vector<Words> members;  // the first member first
  for (const int rank : m.members) {
    if (rank != m.world_rank) members.emplace_back(rank);
  }
  Backoff backoff;
  for (;;) {
    const bool last = passed(deadline);  // then one more read, after the deadline
    bool came = false;
    for (Words& member : members) {  // the first member first: its answer ends the wait
      came |= member.read(m, member.rank == m.members.front() ? nonce : 0);
      if (member.answer) return member.answer;
      member.answer_other_arrival(m, sends);
    }
    if (last) return std::nullopt;
    if (came) backoff.reset();
    backoff.wait();
  }
}

// Any other member: sends its arrival, then waits for the answer to it.
void await_verdict(const Meeting& m) {
  const int first = m.members.front();
  const std::int64_t nonce = next_nonce();
  Sends sends(m.world, m.world_rank);
  sends.post({kArrive, nonce, m.id}, first);
  std::optional<Word> answer;
  try {
    answer = answer_by(m, nonce, deadline_after(m.timeout_s, kVerdictGrace), sends);
  } catch (...) {
    sends.post_quietly({kWithdraw, nonce, m.id}, first);  // an MPI call failed
    throw;
  }
  const std::string first_text = "rank " + std::to_string(first) + ", its first member,";
  if (!answer) {
    sends.post({kWithdraw, nonce, m.id}, first);
    fail_meeting(m, first_text + " did not say within " +
                        seconds_text(m.timeout_s + static_cast<double>(kVerdictGrace.count())) +
                        " (the group's timeout and a grace of " +
                        seconds_text(static_cast<double>(kVerdictGrace.count())) +
                        ") that every member came (it may not have come itself)");
  }
  if ((*answer)[0] == kOtherGroup) {
    fail_meeting(m,
                 first_text + " is making the group of world ranks [" +
                     joined(ranks_in(*answer, 3).first) +
                     "] now, not this one: every rank that two groups share must call new_group "
                     "for them in the same order",
                 concord::ErrorCode::Mismatch);
  }
  const Absence absence = Absence::read_from(*answer, 3);
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

// The members of a new subgroup meet with the group's timeout before
// MPI_Comm_create_group (group_meeting.hpp). Every other member sends the first
// member its arrival, numbered by a count of its own (a nonce), and waits for
// the verdict on that arrival. The first member waits for all of them until
// the timeout, then tells each member that came which members did not: none,
// and the group goes ahead into MPI_Comm_create_group, where every member is
// then known to be. A member that gives up withdraws its arrival, so that a
// later meeting does not count it, and drops any verdict that answers another
// arrival than its own.
#include "group_meeting.hpp"

#include <concord/error.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace concord_torch {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;  // nullopt: for ever

// How much longer than the timeout a member waits for the first member's
// verdict: the first member's timeout starts when it comes, which may be later
// than this member's, and its verdict names the absent. Past it, the member
// fails without one.
constexpr std::chrono::seconds kVerdictGrace{1};
// Between two tests of the pending messages: short beside a group's set-up,
// long enough not to spin a core that other ranks on the node may need.
constexpr std::chrono::microseconds kPollInterval{50};

// A member's word to the first member: {kind, nonce}.
enum Kind : std::int64_t { kArrive = 1, kWithdraw = 2 };

Deadline deadline_after(double timeout_s, Clock::duration extra = {}) {
  if (timeout_s <= 0) return std::nullopt;
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s)) +
         extra;
}

bool passed(const Deadline& deadline) {
  return deadline && Clock::now() >= *deadline;
}

void check_call(int rc, int world_rank, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw concord::Error(concord::ErrorCode::MpiError, world_rank,
                         std::string(call) + " failed in the meeting before a process group");
  }
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
    for (std::size_t i = 0; i < requests_.size(); ++i) {
      int done = 0;
      while (MPI_Test(&requests_[i], &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done &&
             Clock::now() < until) {
        std::this_thread::sleep_for(kPollInterval);
      }
      if (!done && requests_[i] != MPI_REQUEST_NULL) {
        MPI_Request_free(&requests_[i]);
        static_cast<void>(buffers_[i].release());
      }
    }
  }
  void post(std::vector<std::int64_t> words, int to) {
    buffers_.push_back(std::make_unique<std::vector<std::int64_t>>(std::move(words)));
    requests_.push_back(MPI_REQUEST_NULL);
    const std::vector<std::int64_t>& buffer = *buffers_.back();
    check_call(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_INT64_T, to,
                         kMeetingTag, world_, &requests_.back()),
               world_rank_, "MPI_Isend");
  }

 private:
  MPI_Comm world_;
  int world_rank_;
  std::vector<std::unique_ptr<std::vector<std::int64_t>>> buffers_;
  std::vector<MPI_Request> requests_;
};

// The next message from `from` if one has come by `deadline` (matched by a
// probe, so nothing is left pending when none has: no receive to cancel).
std::optional<std::vector<std::int64_t>> receive_by(int from, Deadline deadline, MPI_Comm world,
                                                    int world_rank) {
  for (;;) {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    check_call(MPI_Improbe(from, kMeetingTag, world, &found, &message, &status), world_rank,
               "MPI_Improbe");
    if (found) {
      int count = 0;
      check_call(MPI_Get_count(&status, MPI_INT64_T, &count), world_rank, "MPI_Get_count");
      std::vector<std::int64_t> words(static_cast<std::size_t>(count));
      check_call(MPI_Mrecv(words.data(), count, MPI_INT64_T, &message, MPI_STATUS_IGNORE),
                 world_rank, "MPI_Mrecv");
      return words;
    }
    if (passed(deadline)) return std::nullopt;
    std::this_thread::sleep_for(kPollInterval);
  }
}

// "0, 2, 3"
std::string joined(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string seconds_text(double timeout_s) {
  std::string text = std::to_string(timeout_s);  // "2.500000"
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

struct Meeting {
  MPI_Comm world;
  const std::vector<int>& members;
  int world_rank;
  std::string what;  // "torch.distributed process group '3' of world ranks [0, 2]"
  double timeout_s;
};

[[noreturn]] void fail_meeting(const Meeting& m, const std::string& why) {
  throw concord::Error(concord::ErrorCode::Timeout, m.world_rank,
                       m.what + ": " + why +
                           "; the group is not made, and a member that comes later fails too: "
                           "end the job, as after a collective's timeout");
}

// The failure where the first member counted `absent` missing; `counted_by`
// says who counted where that is not this rank ("" here).
[[noreturn]] void fail_for_absent(const Meeting& m, const std::vector<int>& absent,
                                  const std::string& counted_by) {
  fail_meeting(m, (absent.size() == 1 ? "rank " : "ranks ") + joined(absent) +
                      " did not come to make it within " + seconds_text(m.timeout_s) +
                      " (the group's timeout" + counted_by + ")");
}

// What the first member knows of another member: its arrival's nonce, unless
// none has come or the last one was withdrawn.
struct Attendance {
  int rank;
  std::optional<std::int64_t> arrival;
  // A word of another size is not a member's (a verdict cannot come this way).
  void take(const std::vector<std::int64_t>& word) {
    if (word.size() != 2) return;
    if (word[0] == kArrive) arrival = word[1];
    if (word[0] == kWithdraw && arrival == word[1]) arrival.reset();
  }
};

void take_what_has_come(Attendance& other, const Meeting& m) {
  while (const auto word = receive_by(other.rank, Clock::now(), m.world, m.world_rank)) {
    other.take(*word);
  }
}

// The first member: takes the others' words until each has an arrival standing
// or the timeout passes, then everything they have sent by now (a withdrawal
// after the arrival, perhaps); then tells each that came who did not.
void gather_arrivals(const Meeting& m) {
  std::vector<Attendance> others;
  for (std::size_t i = 1; i < m.members.size(); ++i) others.push_back({m.members[i], {}});
  const Deadline deadline = deadline_after(m.timeout_s);
  for (Attendance& other : others) {
    // Everything it has sent so far first: an arrival left by a meeting it gave
    // up on is followed by its withdrawal.
    for (;;) {
      take_what_has_come(other, m);
      if (other.arrival) break;
      const auto word = receive_by(other.rank, deadline, m.world, m.world_rank);
      if (!word) break;
      other.take(*word);
    }
  }
  std::vector<int> absent;
  for (Attendance& other : others) {
    take_what_has_come(other, m);  // a withdrawal since, perhaps
    if (!other.arrival) absent.push_back(other.rank);
  }
  Sends sends(m.world, m.world_rank);
  for (const Attendance& other : others) {
    if (!other.arrival) continue;
    // {the arrival answered, how many did not come, their world ranks}
    std::vector<std::int64_t> verdict{*other.arrival, static_cast<std::int64_t>(absent.size())};
    verdict.insert(verdict.end(), absent.begin(), absent.end());
    sends.post(std::move(verdict), other.rank);
  }
  if (!absent.empty()) {
    fail_for_absent(m, absent, "");
  }
}

std::int64_t next_nonce() {
  static std::atomic<std::int64_t> count{0};
  return ++count;
}

// Any other member: sends its arrival, then waits for the verdict on it.
void await_verdict(const Meeting& m) {
  const int first = m.members.front();
  const std::int64_t nonce = next_nonce();
  Sends sends(m.world, m.world_rank);
  sends.post({kArrive, nonce}, first);
  const Deadline deadline = deadline_after(m.timeout_s, kVerdictGrace);
  std::vector<std::int64_t> verdict;
  for (;;) {
    auto answer = receive_by(first, deadline, m.world, m.world_rank);
    if (!answer) {
      sends.post({kWithdraw, nonce}, first);
      fail_meeting(m, "rank " + std::to_string(first) + ", its first member, did not say within " +
                          seconds_text(m.timeout_s) +
                          " (the group's timeout) that every member came (it may not have come "
                          "itself)");
    }
    if (answer->size() >= 2 && (*answer)[0] == nonce) {
      verdict = std::move(*answer);
      break;
    }
    // Else it answers an arrival of an earlier meeting, one this rank gave up on.
  }
  if (verdict[1] > 0) {
    const std::vector<int> absent(verdict.begin() + 2, verdict.end());
    fail_for_absent(m, absent, ", as rank " + std::to_string(first) + " counted it");
  }
}

std::string group_text(const std::string& group_name, const std::vector<int>& members) {
  return "torch.distributed process group '" + group_name + "' of world ranks [" + joined(members) +
         "]";
}

}  // namespace

void meet_group_members(MPI_Comm world, const std::vector<int>& members, int world_rank,
                        const std::string& group_name, double timeout_s) {
  if (members.size() < 2) return;
  const Meeting meeting{world, members, world_rank, group_text(group_name, members), timeout_s};
  if (world_rank == members.front()) {
    gather_arrivals(meeting);
  } else {
    await_verdict(meeting);
  }
}

}  // namespace concord_torch

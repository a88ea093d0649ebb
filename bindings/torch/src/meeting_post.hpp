// The post of the meetings before a process group (group_meeting.hpp): words
// of int64 between two ranks on concord's world communicator, under one tag,
// read without blocking; the words read for a later meeting, kept for it; and
// what this rank has learnt of meetings that failed. One meeting at a time in
// a process, as group_meeting.hpp says.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace concord_torch::meeting {

using Clock = std::chrono::steady_clock;
using Deadline = std::optional<Clock::time_point>;  // nullopt: for ever
using Word = std::vector<std::int64_t>;

// The message tag of the meetings: above concord's own tags (101-107, on any
// communicator; concord never receives with MPI_ANY_TAG) and within the 32767
// that MPI_TAG_UB is at least.
inline constexpr int kTag = 7707;

// `timeout_s` from now, and `extra`; none (for ever) where it is 0 or less.
Deadline deadline_after(double timeout_s, Clock::duration extra = {});
bool passed(const Deadline& deadline);

// Sleeps between two reads that found nothing: from 20 us, doubling up to 1 ms,
// so a meeting whose members are arriving answers fast and one that waits for
// a late member does not spin a core that other ranks on the node may need.
class Backoff {
 public:
  void reset() { next_ = kFirst; }
  void wait();

 private:
  static constexpr std::chrono::microseconds kFirst{20};
  std::chrono::microseconds next_{kFirst};
};

// Throws concord::Error(MpiError) where `rc` is not MPI_SUCCESS.
void check_call(int rc, int world_rank, const char* call);

// A meeting's sends: each buffer is kept until its send completes. At the end
// of the meeting they are given a grace of a second to complete; what is left
// then (a rank gone that never takes it) goes on in MPI, which may still read
// the buffer, so the buffer is kept for the process's life (a few bytes, on a
// path that ends the job).
class Sends {
 public:
  Sends(MPI_Comm world, int world_rank) : world_(world), world_rank_(world_rank) {}
  Sends(const Sends&) = delete;
  Sends& operator=(const Sends&) = delete;
  ~Sends();
  void post(Word word, int to);
  // On a path that is failing already: a send that fails too is left out.
  void post_quietly(Word word, int to) noexcept;

 private:
  MPI_Comm world_;
  int world_rank_;
  std::vector<std::unique_ptr<Word>> buffers_;
  std::vector<MPI_Request> requests_;
};

// The next word from `from`: one kept for later first, else one that has come
// (matched by a probe, so nothing is left pending when none has: no receive to
// cancel); none if neither.
std::optional<Word> receive_now(int from, MPI_Comm world, int world_rank);
// Puts back `word`, the last read from `from`, for the next meeting to read
// first.
void keep_for_later(int from, Word word);

// `rank` came to meeting `id` (by its members) and withdrew: as read by this
// rank, its first member. Forgotten for the members of a meeting that is made.
void note_left(int rank, std::int64_t id);
bool has_left(int rank, std::int64_t id);
void forget_left(const std::vector<int>& members, std::int64_t id);
// This rank, the first member of meeting `id`, gave up on it (or, false, is
// holding it again).
void note_given_up(std::int64_t id, bool given_up);
bool gave_up_on(std::int64_t id);

}  // namespace concord_torch::meeting

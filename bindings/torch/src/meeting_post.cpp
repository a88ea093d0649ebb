#include "meeting_post.hpp"

#include <concord/error.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace concord_torch::meeting {

namespace {

constexpr std::chrono::microseconds kLongestPoll{1000};
constexpr std::chrono::seconds kSendGrace{1};

// What outlives a meeting (one at a time, so unguarded).
struct Remembered {
  std::map<int, std::deque<Word>> kept;        // by the rank that sent them, oldest first
  std::map<int, std::set<std::int64_t>> left;  // by rank: meetings it came to and left
  std::set<std::int64_t> given_up;             // meetings this rank was first of, failed
};

Remembered& remembered() {
  static Remembered instance;
  return instance;
}

}  // namespace

Deadline deadline_after(double timeout_s, Clock::duration extra) {
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

void Backoff::wait() {
  std::this_thread::sleep_for(next_);
  next_ = std::min(next_ * 2, kLongestPoll);
}

void check_call(int rc, int world_rank, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw concord::Error(concord::ErrorCode::MpiError, world_rank,
                         std::string(call) + " failed in the meeting before a process group");
  }
}

Sends::~Sends() {
  const Clock::time_point until = Clock::now() + kSendGrace;
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

void Sends::post(Word word, int to) {
  buffers_.push_back(std::make_unique<Word>(std::move(word)));
  requests_.push_back(MPI_REQUEST_NULL);
  const Word& buffer = *buffers_.back();
  const int rc = MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_INT64_T, to, kTag,
                           world_, &requests_.back());
  if (rc != MPI_SUCCESS) requests_.back() = MPI_REQUEST_NULL;  // undefined after a failure
  check_call(rc, world_rank_, "MPI_Isend");
}

void Sends::post_quietly(Word word, int to) noexcept {
  try {
    post(std::move(word), to);
  } catch (...) {
    // The failure on its way says more than this one would.
  }
}

std::optional<Word> receive_now(int from, MPI_Comm world, int world_rank) {
  const auto kept = remembered().kept.find(from);
  if (kept != remembered().kept.end() && !kept->second.empty()) {
    Word word = std::move(kept->second.front());
    kept->second.pop_front();
    return word;
  }
  int found = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  check_call(MPI_Improbe(from, kTag, world, &found, &message, &status), world_rank, "MPI_Improbe");
  if (!found) return std::nullopt;
  int count = 0;
  check_call(MPI_Get_count(&status, MPI_INT64_T, &count), world_rank, "MPI_Get_count");
  Word word(static_cast<std::size_t>(count));
  check_call(MPI_Mrecv(word.data(), count, MPI_INT64_T, &message, MPI_STATUS_IGNORE), world_rank,
             "MPI_Mrecv");
  return word;
}

void keep_for_later(int from, Word word) {
  remembered().kept[from].push_front(std::move(word));
}

void note_left(int rank, std::int64_t id) {
  remembered().left[rank].insert(id);
}

bool has_left(int rank, std::int64_t id) {
  const auto found = remembered().left.find(rank);
  return found != remembered().left.end() && found->second.count(id) > 0;
}

void forget_left(const std::vector<int>& members, std::int64_t id) {
  for (const int rank : members) {
    const auto found = remembered().left.find(rank);
    if (found != remembered().left.end()) found->second.erase(id);
  }
}

void note_given_up(std::int64_t id, bool given_up) {
  if (given_up) {
    remembered().given_up.insert(id);
  } else {
    remembered().given_up.erase(id);
  }
}

bool gave_up_on(std::int64_t id) {
  return remembered().given_up.count(id) > 0;
}

}  // namespace concord_torch::meeting

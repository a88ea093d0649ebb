// Chrome-trace (Perfetto) timeline of the engine: one track per tensor, with the
// phases NEGOTIATE (enqueued until agreed on by every rank), QUEUE (agreed until
// its bucket starts), PACK, REDUCE (the collective of its bucket) and UNPACK.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace concord::detail {

class Timeline {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // Opens `path` for writing; throws Error(SystemError) if it cannot.
  Timeline(const std::string& path, int rank);
  ~Timeline();  // closes the JSON array: the file is valid JSON from then on
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A complete event [begin, end) on the tensor's track. Thread-safe; never
  // throws (an event that cannot be written is dropped).
  void span(const std::string& tensor, const char* phase, TimePoint begin, TimePoint end,
            const std::string& detail = {}) noexcept;

 private:
  int track(const std::string& tensor);  // with mutex_ held
  void write_event(const nlohmann::json& event);

  // Closes the file; the trace's closing bracket is written by ~Timeline first.
  struct CloseFile {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };

  std::mutex mutex_;
  std::unique_ptr<std::FILE, CloseFile> file_;
  int rank_;
  TimePoint origin_;
  bool first_ = true;
  std::unordered_map<std::string, int> tracks_;
};

}  // namespace concord::detail

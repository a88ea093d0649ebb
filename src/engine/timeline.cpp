#include "engine/timeline.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>

namespace concord::detail {
namespace {

double micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

}  // namespace

Timeline::Timeline(const std::string& path, int rank)
    : rank_(rank), origin_(std::chrono::steady_clock::now()) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    throw Error(ErrorCode::SystemError, rank,
                fmt::format("CONCORD_TIMELINE: cannot open '{}' for writing: {}", path,
                            std::strerror(errno)));
  }
  std::fputs("[\n", file_);
  nlohmann::json process = {{"name", "process_name"},
                            {"ph", "M"},
                            {"pid", rank_},
                            {"args", {{"name", fmt::format("concord rank {}", rank_)}}}};
  write_event(process.dump());
}

Timeline::~Timeline() {
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
}

void Timeline::write_event(const std::string& json) {
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(json.c_str(), file_);
}

int Timeline::track(const std::string& tensor) {
  auto [it, inserted] = tracks_.try_emplace(tensor, static_cast<int>(tracks_.size()) + 1);
  if (inserted) {
    nlohmann::json meta = {{"name", "thread_name"},
                           {"ph", "M"},
                           {"pid", rank_},
                           {"tid", it->second},
                           {"args", {{"name", tensor}}}};
    write_event(meta.dump());
  }
  return it->second;
}

void Timeline::span(const std::string& tensor, const char* phase, TimePoint begin, TimePoint end,
                    const std::string& detail) {
  std::lock_guard lock(mutex_);
  nlohmann::json event = {{"name", phase},
                          {"ph", "X"},
                          {"pid", rank_},
                          {"tid", track(tensor)},
                          {"ts", micros(begin - origin_)},
                          {"dur", micros(end - begin)}};
  if (!detail.empty()) event["args"] = {{"detail", detail}};
  write_event(event.dump());
}

}  // namespace concord::detail

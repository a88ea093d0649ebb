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
  file_.reset(std::fopen(path.c_str(), "w"));
  if (!file_) {
    throw Error(ErrorCode::SystemError, rank,
                fmt::format("CONCORD_TIMELINE: cannot open '{}' for writing: {}", path,
                            std::strerror(errno)));
  }
  std::fputs("[\n", file_.get());
  write_event({{"name", "process_name"},
               {"ph", "M"},
               {"pid", rank_},
               {"args", {{"name", fmt::format("concord rank {}", rank_)}}}});
}

Timeline::~Timeline() {
  if (file_) std::fputs("\n]\n", file_.get());
}

void Timeline::write_event(const nlohmann::json& event) {
  // Names are the user's bytes: invalid UTF-8 is replaced, never thrown on.
  const std::string text = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!first_) std::fputs(",\n", file_.get());
  first_ = false;
  std::fputs(text.c_str(), file_.get());
}

int Timeline::track(const std::string& tensor) {
  auto [it, inserted] = tracks_.try_emplace(tensor, static_cast<int>(tracks_.size()) + 1);
  if (inserted) {
    write_event({{"name", "thread_name"},
                 {"ph", "M"},
                 {"pid", rank_},
                 {"tid", it->second},
                 {"args", {{"name", tensor}}}});
  }
  return it->second;
}

void Timeline::span(const std::string& tensor, const char* phase, TimePoint begin, TimePoint end,
                    const std::string& detail) noexcept {
  // Tracing must never change what the engine does: an event that cannot be
  // written (no memory) is dropped.
  try {
    std::lock_guard lock(mutex_);
    nlohmann::json event = {{"name", phase},
                            {"ph", "X"},
                            {"pid", rank_},
                            {"tid", track(tensor)},
                            {"ts", micros(begin - origin_)},
                            {"dur", micros(end - begin)}};
    if (!detail.empty()) event["args"] = {{"detail", detail}};
    write_event(event);
  } catch (...) {
  }
}

}  // namespace concord::detail

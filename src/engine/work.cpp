#include "engine/work.hpp"

#include <cstdio>
#include <exception>

#include <fmt/format.h>

namespace concord::detail {

const char* kind_name(WorkKind kind) {
  switch (kind) {
    case WorkKind::Allreduce:
      return "allreduce";
    case WorkKind::Broadcast:
      return "broadcast";
    case WorkKind::Allgather:
      return "allgather";
    case WorkKind::Alltoall:
      return "alltoall";
    case WorkKind::Reducescatter:
      return "reducescatter";
    case WorkKind::Join:
      return "join";
  }
  return "?";
}

std::string Signature::describe() const {
  switch (kind) {
    case WorkKind::Allreduce:
      return fmt::format("allreduce {} {} count={} prescale={} postscale={}", to_string(dtype),
                         to_string(op), count, prescale, postscale);
    case WorkKind::Broadcast:
      return fmt::format("broadcast {} count={} root={}", to_string(dtype), count, root);
    case WorkKind::Allgather:
      return fmt::format("allgather {} row_elements={}", to_string(dtype), count);
    case WorkKind::Alltoall:
      return fmt::format("alltoall {} row_elements={}", to_string(dtype), count);
    case WorkKind::Reducescatter:
      return fmt::format("reducescatter {} {} count={} row_elements={} prescale={} postscale={}",
                         to_string(dtype), to_string(op), count, row_elements, prescale, postscale);
    case WorkKind::Join:
      return "join";
  }
  return "unknown";
}

void Work::finish(std::optional<Error> failure) {
  {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    results_ready = true;  // output()/first_dims() may be read from the callback on
  }
  cv.notify_all();
  if (done) {
    // The callback runs before the handle reports completion, so a waiter sees
    // its effects; it must not throw across the engine thread. What it throws is
    // reported (the callback's own work, a framework op's completion, may be lost
    // with it) and the engine goes on.
    try {
      done(error ? &*error : nullptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "concord: engine: the completion callback of '%s' threw: %s\n",
                   name.c_str(), e.what());
    } catch (...) {
      std::fprintf(stderr, "concord: engine: the completion callback of '%s' threw\n",
                   name.c_str());
    }
  }
  {
    std::lock_guard lock(mutex);
    complete = true;
  }
  cv.notify_all();
}

}  // namespace concord::detail

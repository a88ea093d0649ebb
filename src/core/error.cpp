// concord::Error: a code, the rank that raised it, and a message naming both.
#include <concord/error.hpp>

#include <fmt/format.h>

namespace concord {

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "invalid argument";
    case ErrorCode::Mismatch:
      return "argument mismatch across ranks";
    case ErrorCode::MpiError:
      return "MPI error";
    case ErrorCode::Finalized:
      return "MPI finalized";
    case ErrorCode::Internal:
      return "internal error";
    case ErrorCode::SystemError:
      return "system error";
    case ErrorCode::Shutdown:
      return "engine shut down";
    case ErrorCode::Timeout:
      return "timeout";
  }
  return "unknown error";
}

namespace {
std::string format_message(int rank, const std::string& message) {
  if (rank < 0) return fmt::format("concord: {}", message);
  return fmt::format("concord: rank {}: {}", rank, message);
}
}  // namespace

Error::Error(ErrorCode code, int rank, const std::string& message)
    : std::runtime_error(format_message(rank, message)), code_(code), rank_(rank) {}

}  // namespace concord

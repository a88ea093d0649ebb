#include "settings.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace concord::mpi_interposer {
namespace {

std::string invalid(const char* name, std::string_view value, const char* expected) {
  return std::string(name) + "='" + std::string(value) + "' is invalid: expected " + expected;
}

Settings parse() {
  Settings s;
  if (const char* v = std::getenv("CONCORD_MPI_INTERPOSE")) {
    const std::string_view value(v);
    if (value == "0" || value == "off" || value == "false" || value == "no") {
      s.enabled = false;
    } else if (!(value.empty() || value == "1" || value == "on" || value == "true" ||
                 value == "yes")) {
      s.error = invalid("CONCORD_MPI_INTERPOSE", value, "0/1, on/off, true/false or yes/no");
    }
  }
  if (const char* v = std::getenv("CONCORD_MPI_INTERPOSE_VERBOSE")) {
    const std::string_view value(v);
    s.verbose = value == "1" || value == "on" || value == "true" || value == "yes";
    if (!s.verbose &&
        !(value.empty() || value == "0" || value == "off" || value == "false" || value == "no")) {
      s.error =
          invalid("CONCORD_MPI_INTERPOSE_VERBOSE", value, "0/1, on/off, true/false or yes/no");
    }
  }
  if (const char* v = std::getenv("CONCORD_MPI_INTERPOSE_MIN_BYTES"); v && *v) {
    const std::string_view value(v);
    std::size_t bytes = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bytes);
    if (ec != std::errc() || end != value.data() + value.size()) {
      s.error = invalid("CONCORD_MPI_INTERPOSE_MIN_BYTES", value, "a number of bytes >= 0");
    } else {
      s.min_bytes = bytes;
    }
  }
  if (!s.error.empty()) s.enabled = false;
  return s;
}

}  // namespace

Settings parse_settings() noexcept {
  try {
    return parse();
  } catch (...) {
    std::fputs(
        "concord_mpi: cannot read the CONCORD_MPI_INTERPOSE* settings (out of memory); "
        "every MPI_Allreduce goes to MPI\n",
        stderr);
    Settings off;
    off.enabled = false;
    return off;
  }
}

}  // namespace concord::mpi_interposer

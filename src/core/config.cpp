#include "core/config.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <limits>

namespace concord::detail {
namespace {

[[noreturn]] void bad_value(const char* name, const std::string& value, const char* expected) {
  throw Error(
      ErrorCode::InvalidArgument, -1,
      fmt::format("environment variable {}='{}' is invalid: expected {}", name, value, expected));
}

bool parse_bool(const char* name, const std::string& value) {
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty())
    return false;
  bad_value(name, value, "0/1, true/false, yes/no or on/off");
}

unsigned long long parse_unsigned(const char* name, const std::string& value,
                                  unsigned long long min, unsigned long long max) {
  unsigned long long result = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, result);
  if (ec != std::errc() || ptr != end || result < min || result > max) {
    bad_value(name, value, fmt::format("an integer in [{}, {}]", min, max).c_str());
  }
  return result;
}

double parse_seconds(const char* name, const std::string& value, double max) {
  double result = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, result);
  if (ec != std::errc() || ptr != end || !(result >= 0) || result > max) {
    bad_value(name, value, fmt::format("a number in [0, {}]", max).c_str());
  }
  return result;
}

// The engine's settings (fusion threshold, cycle time, stall limits, timeline) and the
// transports' timeout.
void parse_engine_settings(const EnvLookup& lookup, Config& config) {
  if (auto v = lookup("CONCORD_FUSION_THRESHOLD"); v && !v->empty()) {
    config.fusion_threshold = parse_unsigned("CONCORD_FUSION_THRESHOLD", *v, 0, 1ull << 34);
  }
  if (auto v = lookup("CONCORD_FUSION_IN_PLACE_BYTES"); v && !v->empty()) {
    config.fusion_in_place_bytes =
        parse_unsigned("CONCORD_FUSION_IN_PLACE_BYTES", *v, 0, 1ull << 34);
  }
  if (auto v = lookup("CONCORD_CYCLE_TIME_MS"); v && !v->empty()) {
    config.cycle_time_ms = parse_seconds("CONCORD_CYCLE_TIME_MS", *v, kMaxCycleTimeMs);
  }
  if (auto v = lookup("CONCORD_STALL_WARNING_S"); v && !v->empty()) {
    config.stall_warning_s = parse_seconds("CONCORD_STALL_WARNING_S", *v, kMaxTimeoutS);
  }
  if (auto v = lookup("CONCORD_STALL_TIMEOUT_S"); v && !v->empty()) {
    config.stall_timeout_s = parse_seconds("CONCORD_STALL_TIMEOUT_S", *v, kMaxTimeoutS);
  }
  if (auto v = lookup("CONCORD_TRANSPORT_TIMEOUT_S"); v && !v->empty()) {
    config.transport_timeout_s = parse_seconds("CONCORD_TRANSPORT_TIMEOUT_S", *v, kMaxTimeoutS);
  }
  if (auto v = lookup("CONCORD_TIMELINE")) config.timeline_path = *v;
}

// The device path's settings (docs/GPU.md, "Configuration").
void parse_device_settings(const EnvLookup& lookup, Config& config) {
  if (auto v = lookup("CONCORD_POINTER_CACHE_ENTRIES"); v && !v->empty()) {
    config.pointer_cache_entries =
        parse_unsigned("CONCORD_POINTER_CACHE_ENTRIES", *v, 0, 1ull << 24);
  }
  if (auto v = lookup("CONCORD_CUDA_IPC"); v && !v->empty()) {
    config.cuda_ipc = parse_bool("CONCORD_CUDA_IPC", *v);
  }
  if (auto v = lookup("CONCORD_CUDA_IPC_REGION_BYTES"); v && !v->empty()) {
    config.cuda_ipc_region_bytes =
        parse_unsigned("CONCORD_CUDA_IPC_REGION_BYTES", *v, 4096, 1ull << 32);
  }
  if (auto v = lookup("CONCORD_CUDA_PEER"); v && !v->empty()) {
    if (*v == "auto") {
      config.cuda_peer = DevicePeerMode::Auto;
    } else if (*v == "1" || *v == "on") {
      config.cuda_peer = DevicePeerMode::On;
    } else if (*v == "0" || *v == "off") {
      config.cuda_peer = DevicePeerMode::Off;
    } else {
      bad_value("CONCORD_CUDA_PEER", *v, "auto, on (or 1) or off (or 0)");
    }
  }
  if (auto v = lookup("CONCORD_CUDA_DIRECT_BYTES"); v && !v->empty()) {
    config.cuda_direct_bytes = parse_unsigned("CONCORD_CUDA_DIRECT_BYTES", *v, 0, 1ull << 32);
  }
  if (auto v = lookup("CONCORD_CUDA_STAGING_BYTES"); v && !v->empty()) {
    config.cuda_staging_bytes = parse_unsigned("CONCORD_CUDA_STAGING_BYTES", *v, 4096, 1ull << 32);
  }
  if (auto v = lookup("CONCORD_NCCL"); v && !v->empty()) {
    config.nccl = parse_bool("CONCORD_NCCL", *v);
  }
  if (auto v = lookup("CONCORD_NCCL_LIBRARY")) config.nccl_library = *v;
}

// How Hierarchical crosses the network: from how many ranks of a node, in what pieces.
void parse_hierarchical_settings(const EnvLookup& lookup, Config& config) {
  if (auto v = lookup("CONCORD_HIERARCHICAL_SPREAD_BYTES"); v && !v->empty()) {
    config.hierarchical_spread_bytes =
        parse_unsigned("CONCORD_HIERARCHICAL_SPREAD_BYTES", *v, 0, std::uint64_t{1} << 62);
  }
  if (auto v = lookup("CONCORD_HIERARCHICAL_PIECE_BYTES"); v && !v->empty()) {
    config.hierarchical_piece_bytes =
        parse_unsigned("CONCORD_HIERARCHICAL_PIECE_BYTES", *v, 0, kMaxHierarchicalPieceBytes);
  }
}

}  // namespace

Config parse_config(const EnvLookup& lookup) {
  Config config;
  if (auto v = lookup("CONCORD_ALLREDUCE_ALGORITHM"); v && !v->empty()) {
    try {
      config.algorithm_override = parse_algorithm(*v);
    } catch (const Error&) {
      bad_value("CONCORD_ALLREDUCE_ALGORITHM", *v,
                "auto, ring, recursive_doubling, reduce_scatter_allgather or hierarchical");
    }
    if (config.algorithm_override == Algorithm::Auto) config.algorithm_override.reset();
  }
  if (auto v = lookup("CONCORD_CHECK_ARGS"))
    config.check_args = parse_bool("CONCORD_CHECK_ARGS", *v);
  if (auto v = lookup("CONCORD_RING_SEGMENT_BYTES"); v && !v->empty()) {
    config.ring_segment_bytes = parse_unsigned("CONCORD_RING_SEGMENT_BYTES", *v,
                                               kMinRingSegmentBytes, kMaxRingSegmentBytes);
  }
  if (auto v = lookup("CONCORD_TUNING_FILE")) config.tuning_file = *v;
  if (auto v = lookup("CONCORD_VIRTUAL_NODES"); v && !v->empty()) {
    config.virtual_nodes = static_cast<int>(parse_unsigned("CONCORD_VIRTUAL_NODES", *v, 1, 4096));
  }
  if (auto v = lookup("CONCORD_SHM"); v && !v->empty()) config.shm = parse_bool("CONCORD_SHM", *v);
  if (auto v = lookup("CONCORD_SHM_REGION_BYTES"); v && !v->empty()) {
    config.shm_region_bytes = parse_unsigned("CONCORD_SHM_REGION_BYTES", *v, 256, 1ull << 30);
  }
  if (auto v = lookup("CONCORD_SHM_DIRECT_BYTES"); v && !v->empty()) {
    config.shm_direct_bytes = parse_unsigned("CONCORD_SHM_DIRECT_BYTES", *v, 0, 1ull << 30);
  }
  if (auto v = lookup("CONCORD_SHM_STREAM_BYTES"); v && !v->empty()) {
    config.shm_stream_bytes =
        parse_unsigned("CONCORD_SHM_STREAM_BYTES", *v, 0, std::numeric_limits<std::size_t>::max());
  }
  if (auto v = lookup("CONCORD_SHM_SINGLE_COPY_BYTES"); v && !v->empty()) {
    config.shm_single_copy_bytes = parse_unsigned("CONCORD_SHM_SINGLE_COPY_BYTES", *v, 0,
                                                  std::numeric_limits<std::size_t>::max());
  }
  if (auto v = lookup("CONCORD_SHM_HEAP_BYTES"); v && !v->empty()) {
    config.shm_heap_bytes = parse_unsigned("CONCORD_SHM_HEAP_BYTES", *v, 0, 1ull << 40);
  }
  if (auto v = lookup("CONCORD_SHM_CMA"); v && !v->empty())
    config.shm_cma = parse_bool("CONCORD_SHM_CMA", *v);
  if (auto v = lookup("CONCORD_SHM_PATH_CHOICE"); v && !v->empty()) {
    if (*v != "measure" && *v != "threshold") {
      bad_value("CONCORD_SHM_PATH_CHOICE", *v, "measure or threshold");
    }
    config.shm_measure_paths = *v == "measure";
  }
  if (auto v = lookup("CONCORD_SHM_PHASE_TIMES"); v && !v->empty())
    config.shm_phase_times = parse_bool("CONCORD_SHM_PHASE_TIMES", *v);
  parse_engine_settings(lookup, config);
  parse_hierarchical_settings(lookup, config);
  parse_device_settings(lookup, config);
  return config;
}

const Config& config() {
  static const Config instance = parse_config([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
  return instance;
}

}  // namespace concord::detail

#include <catch2/catch.hpp>

#include <concord/error.hpp>

#include "core/config.hpp"

#include <map>
#include <string>
#include <utility>

using concord::Algorithm;
using concord::Error;
using concord::detail::parse_config;

namespace {
concord::detail::EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}
}  // namespace

TEST_CASE("defaults when nothing is set", "[config]") {
  auto c = parse_config(env({}));
  CHECK_FALSE(c.algorithm_override.has_value());
  CHECK_FALSE(c.check_args);
  CHECK(c.ring_segment_bytes == 256 * 1024);
  CHECK(c.tuning_file.empty());
  CHECK(c.virtual_nodes == 1);
  CHECK(c.shm);
  CHECK(c.shm_region_bytes == 256 * 1024);
  CHECK_FALSE(c.shm_direct_bytes.has_value());  // the tuning table's (test_tuning_table.cpp)
  CHECK(c.transport_timeout_s == 1800.0);
  CHECK_FALSE(c.shm_stream_bytes.has_value());  // the same
  CHECK_FALSE(c.shm_phase_times);
}

TEST_CASE("the transport timeout", "[config]") {
  CHECK(parse_config(env({{"CONCORD_TRANSPORT_TIMEOUT_S", "2.5"}})).transport_timeout_s == 2.5);
  CHECK(parse_config(env({{"CONCORD_TRANSPORT_TIMEOUT_S", "0"}})).transport_timeout_s == 0.0);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_TRANSPORT_TIMEOUT_S", "-1"}})),
                    Catch::Matchers::Contains("CONCORD_TRANSPORT_TIMEOUT_S='-1'"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_TRANSPORT_TIMEOUT_S", "soon"}})),
                    Catch::Matchers::Contains("CONCORD_TRANSPORT_TIMEOUT_S='soon'"));
}

TEST_CASE("shared-memory variables", "[config]") {
  auto c = parse_config(env({{"CONCORD_SHM", "0"},
                             {"CONCORD_SHM_REGION_BYTES", "4096"},
                             {"CONCORD_SHM_DIRECT_BYTES", "0"},
                             {"CONCORD_SHM_STREAM_BYTES", "0"},
                             {"CONCORD_SHM_PHASE_TIMES", "1"}}));
  CHECK(c.shm_stream_bytes == 0);
  CHECK(c.shm_phase_times);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_SHM_STREAM_BYTES", "-1"}})),
                    Catch::Matchers::Contains("CONCORD_SHM_STREAM_BYTES='-1'"));
  CHECK_FALSE(c.shm);
  CHECK(c.shm_region_bytes == 4096);
  CHECK(c.shm_direct_bytes == 0);
  CHECK(parse_config(env({{"CONCORD_SHM", ""}})).shm);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_SHM_REGION_BYTES", "64"}})),
                    Catch::Matchers::Contains("CONCORD_SHM_REGION_BYTES='64'") &&
                        Catch::Matchers::Contains("[256, 1073741824]"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_SHM", "sometimes"}})),
                    Catch::Matchers::Contains("CONCORD_SHM='sometimes'"));
  CHECK(parse_config(env({})).shm_measure_paths);
  CHECK(parse_config(env({{"CONCORD_SHM_PATH_CHOICE", "measure"}})).shm_measure_paths);
  CHECK_FALSE(parse_config(env({{"CONCORD_SHM_PATH_CHOICE", "threshold"}})).shm_measure_paths);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_SHM_PATH_CHOICE", "fastest"}})),
                    Catch::Matchers::Contains("CONCORD_SHM_PATH_CHOICE='fastest'") &&
                        Catch::Matchers::Contains("measure or threshold"));
  CHECK_FALSE(parse_config(env({})).shm_heap_bytes.has_value());  // default_heap_bytes()
  CHECK(parse_config(env({{"CONCORD_SHM_HEAP_BYTES", "0"}})).shm_heap_bytes == 0);
  CHECK(parse_config(env({{"CONCORD_SHM_HEAP_BYTES", "4194304"}})).shm_heap_bytes == 4194304);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_SHM_HEAP_BYTES", "2T"}})),
                    Catch::Matchers::Contains("CONCORD_SHM_HEAP_BYTES='2T'") &&
                        Catch::Matchers::Contains("[0, 1099511627776]"));
}

TEST_CASE("variables are parsed", "[config]") {
  auto c = parse_config(env({{"CONCORD_ALLREDUCE_ALGORITHM", "recursive_doubling"},
                             {"CONCORD_CHECK_ARGS", "1"},
                             {"CONCORD_RING_SEGMENT_BYTES", "65536"},
                             {"CONCORD_TUNING_FILE", "/tmp/table.json"},
                             {"CONCORD_VIRTUAL_NODES", "2"}}));
  CHECK(c.algorithm_override == Algorithm::RecursiveDoubling);
  CHECK(c.check_args);
  CHECK(c.ring_segment_bytes == 65536);
  CHECK(c.tuning_file == "/tmp/table.json");
  CHECK(c.virtual_nodes == 2);
  CHECK_FALSE(parse_config(env({{"CONCORD_ALLREDUCE_ALGORITHM", "auto"}})).algorithm_override);
  CHECK_FALSE(parse_config(env({{"CONCORD_CHECK_ARGS", "off"}})).check_args);
}

TEST_CASE("bad values name the variable and what is accepted", "[config]") {
  auto message = [](std::map<std::string, std::string> vars) {
    try {
      parse_config(env(std::move(vars)));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message({{"CONCORD_ALLREDUCE_ALGORITHM", "tree"}}),
             Contains("CONCORD_ALLREDUCE_ALGORITHM='tree'") && Contains("recursive_doubling"));
  CHECK_THAT(message({{"CONCORD_CHECK_ARGS", "maybe"}}), Contains("CONCORD_CHECK_ARGS"));
  CHECK_THAT(message({{"CONCORD_RING_SEGMENT_BYTES", "12k"}}),
             Contains("CONCORD_RING_SEGMENT_BYTES") && Contains("integer"));
  CHECK_THAT(message({{"CONCORD_RING_SEGMENT_BYTES", "1"}}), Contains("[64,"));
  CHECK_THAT(message({{"CONCORD_VIRTUAL_NODES", "0"}}), Contains("CONCORD_VIRTUAL_NODES"));
}

TEST_CASE("CONCORD_FUSION_THRESHOLD", "[config]") {
  // Unset: the engine picks by topology (64 MiB in a node, 4 MiB across nodes).
  CHECK_FALSE(parse_config(env({})).fusion_threshold.has_value());
  CHECK(parse_config(env({{"CONCORD_FUSION_THRESHOLD", "0"}})).fusion_threshold == 0);
  CHECK(parse_config(env({{"CONCORD_FUSION_THRESHOLD", "4194304"}})).fusion_threshold ==
        std::size_t{4} << 20);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_FUSION_THRESHOLD", "-1"}})),
                    Catch::Matchers::Contains("CONCORD_FUSION_THRESHOLD"));
}

TEST_CASE("CONCORD_FUSION_IN_PLACE_BYTES", "[config]") {
  // Unset: the engine's default (256 KiB); 0 turns the rule off.
  CHECK_FALSE(parse_config(env({})).fusion_in_place_bytes.has_value());
  CHECK(parse_config(env({{"CONCORD_FUSION_IN_PLACE_BYTES", "0"}})).fusion_in_place_bytes == 0);
  CHECK(parse_config(env({{"CONCORD_FUSION_IN_PLACE_BYTES", "1048576"}})).fusion_in_place_bytes ==
        std::size_t{1} << 20);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_FUSION_IN_PLACE_BYTES", "1M"}})),
                    Catch::Matchers::Contains("CONCORD_FUSION_IN_PLACE_BYTES"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_FUSION_IN_PLACE_BYTES", "17179869185"}})),
                    Catch::Matchers::Contains("CONCORD_FUSION_IN_PLACE_BYTES"));
}

TEST_CASE("CONCORD_HIERARCHICAL_PIECE_BYTES", "[config]") {
  // Unset: dispatch's default (1 MiB); 0: one step across the network.
  CHECK_FALSE(parse_config(env({})).hierarchical_piece_bytes.has_value());
  CHECK(parse_config(env({{"CONCORD_HIERARCHICAL_PIECE_BYTES", "0"}})).hierarchical_piece_bytes ==
        0);
  CHECK(
      parse_config(env({{"CONCORD_HIERARCHICAL_PIECE_BYTES", "65536"}})).hierarchical_piece_bytes ==
      65536);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_HIERARCHICAL_PIECE_BYTES", "-1"}})),
                    Catch::Matchers::Contains("CONCORD_HIERARCHICAL_PIECE_BYTES"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_HIERARCHICAL_PIECE_BYTES", "1M"}})),
                    Catch::Matchers::Contains("CONCORD_HIERARCHICAL_PIECE_BYTES"));
}

TEST_CASE("CONCORD_HIERARCHICAL_SPREAD_BYTES", "[config]") {
  CHECK_FALSE(parse_config(env({})).hierarchical_spread_bytes.has_value());  // the table's
  CHECK(parse_config(env({{"CONCORD_HIERARCHICAL_SPREAD_BYTES", "0"}})).hierarchical_spread_bytes ==
        0);
  CHECK(parse_config(env({{"CONCORD_HIERARCHICAL_SPREAD_BYTES", "4611686018427387904"}}))
            .hierarchical_spread_bytes == std::size_t{1} << 62);
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_HIERARCHICAL_SPREAD_BYTES", "4M"}})),
                    Catch::Matchers::Contains("CONCORD_HIERARCHICAL_SPREAD_BYTES='4M'"));
}

TEST_CASE("device-path variables", "[config]") {
  const auto defaults = parse_config(env({}));
  CHECK(defaults.cuda_ipc);
  CHECK(defaults.nccl);
  CHECK(defaults.nccl_library.empty());
  CHECK(defaults.pointer_cache_entries == 4096);
  CHECK(defaults.cuda_ipc_region_bytes == 32u << 20);
  CHECK_FALSE(defaults.cuda_direct_bytes.has_value());  // the tuning table's
  CHECK(defaults.cuda_staging_bytes == 4u << 20);

  auto c = parse_config(env({{"CONCORD_CUDA_IPC", "0"},
                             {"CONCORD_NCCL", "off"},
                             {"CONCORD_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2"},
                             {"CONCORD_POINTER_CACHE_ENTRIES", "0"},
                             {"CONCORD_CUDA_IPC_REGION_BYTES", "65536"},
                             {"CONCORD_CUDA_DIRECT_BYTES", "0"},
                             {"CONCORD_CUDA_STAGING_BYTES", "1048576"}}));
  CHECK_FALSE(c.cuda_ipc);
  CHECK_FALSE(c.nccl);
  CHECK(c.nccl_library == "/opt/nccl/lib/libnccl.so.2");
  CHECK(c.pointer_cache_entries == 0);
  CHECK(c.cuda_ipc_region_bytes == 65536);
  CHECK(c.cuda_direct_bytes == 0);
  CHECK(c.cuda_staging_bytes == 1048576);

  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_CUDA_IPC_REGION_BYTES", "100"}})),
                    Catch::Matchers::Contains("CONCORD_CUDA_IPC_REGION_BYTES='100'") &&
                        Catch::Matchers::Contains("[4096,"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_CUDA_IPC", "perhaps"}})),
                    Catch::Matchers::Contains("CONCORD_CUDA_IPC='perhaps'"));
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_POINTER_CACHE_ENTRIES", "-1"}})),
                    Catch::Matchers::Contains("CONCORD_POINTER_CACHE_ENTRIES"));
}

TEST_CASE("CONCORD_CUDA_PEER", "[config]") {
  using concord::detail::DevicePeerMode;
  CHECK(parse_config(env({})).cuda_peer == DevicePeerMode::Auto);
  for (const auto& [value, mode] : {std::pair{"auto", DevicePeerMode::Auto},
                                    {"on", DevicePeerMode::On},
                                    {"1", DevicePeerMode::On},
                                    {"off", DevicePeerMode::Off},
                                    {"0", DevicePeerMode::Off}}) {
    INFO(value);
    CHECK(parse_config(env({{"CONCORD_CUDA_PEER", value}})).cuda_peer == mode);
  }
  CHECK_THROWS_WITH(parse_config(env({{"CONCORD_CUDA_PEER", "yes"}})),
                    Catch::Matchers::Contains("CONCORD_CUDA_PEER='yes'") &&
                        Catch::Matchers::Contains("auto, on (or 1) or off (or 0)"));
}

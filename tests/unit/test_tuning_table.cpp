#include <catch2/catch.hpp>

#include <concord/error.hpp>

#include "collectives/tuning_table.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

using concord::Algorithm;
using concord::detail::TuningTable;

TEST_CASE("the first rule covering the rank count and size wins", "[tuning]") {
  auto table = TuningTable::parse(R"({"rules": [
      {"max_ranks": 2, "algorithms": [{"max_bytes": 1024, "algorithm": "recursive_doubling"},
                                      {"max_bytes": null, "algorithm": "ring"}]},
      {"max_ranks": null, "algorithms": [{"max_bytes": 4096, "algorithm": "recursive_doubling"},
                                         {"max_bytes": null, "algorithm": "reduce_scatter_allgather"}]}]})",
                                  "test");
  CHECK(table.choose(1024, 2) == Algorithm::RecursiveDoubling);
  CHECK(table.choose(1025, 2) == Algorithm::Ring);
  CHECK(table.choose(4096, 3) == Algorithm::RecursiveDoubling);
  CHECK(table.choose(1 << 30, 64) == Algorithm::ReduceScatterAllgather);
}

TEST_CASE("malformed tables are rejected with the reason", "[tuning]") {
  auto message = [](const char* json) {
    try {
      TuningTable::parse(json, "my.json");
    } catch (const concord::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message("{"), Contains("my.json") && Contains("not valid JSON"));
  CHECK_THAT(message(R"({"rules": []})"), Contains("non-empty"));
  CHECK_THAT(
      message(
          R"({"rules": [{"max_ranks": null, "algorithms": [{"max_bytes": 5, "algorithm": "ring"}]}]})"),
      Contains("max_bytes\": null"));
  CHECK_THAT(
      message(
          R"({"rules": [{"max_ranks": 4, "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})"),
      Contains("max_ranks\": null"));
  CHECK_THAT(
      message(
          R"({"rules": [{"max_ranks": null, "algorithms": [{"max_bytes": null, "algorithm": "tree"}]}]})"),
      Contains("tree"));
  CHECK_THAT(
      message(
          R"({"rules": [{"max_ranks": null, "algorithms": [{"max_bytes": null, "algorithm": "auto"}]}]})"),
      Contains("auto"));
}

TEST_CASE("the built-in table parses and covers every size", "[tuning]") {
  const TuningTable& table = TuningTable::built_in();
  for (int ranks : {2, 3, 4, 8, 1000}) {
    for (std::size_t bytes : {std::size_t{4}, std::size_t{1} << 20, std::size_t{1} << 34}) {
      CHECK(table.choose(bytes, ranks) != Algorithm::Auto);
    }
  }
}

TEST_CASE("size thresholds come from the table, built-in values otherwise", "[tuning]") {
  const auto& built_in = concord::detail::TuningTable::built_in().thresholds();
  CHECK(built_in.shm_direct_bytes == 1024);
  CHECK(built_in.shm_pair_direct_bytes == 8 * 1024);
  CHECK(built_in.shm_stream_bytes == 8u << 20);
  CHECK(built_in.cuda_direct_bytes == 256 * 1024);
  CHECK(built_in.nccl_recursive_doubling_bytes == 64 * 1024);
  CHECK(built_in.hierarchical_spread_bytes == 0);  // every local rank crosses the network
  CHECK(built_in.hierarchical_piece_bytes == 1u << 20);
  const auto table = concord::detail::TuningTable::parse(
      R"({"thresholds": {"shm_direct_bytes": 0, "shm_pair_direct_bytes": 2048,
                         "nccl_recursive_doubling_bytes": 4096,
                         "shm_stream_bytes": 65536, "hierarchical_spread_bytes": 4611686018427387904,
                         "hierarchical_piece_bytes": 131072},
          "rules": [{"max_ranks": null, "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
      "test");
  CHECK(table.thresholds().shm_direct_bytes == 0);
  CHECK(table.thresholds().shm_pair_direct_bytes == 2048);
  CHECK(table.thresholds().shm_stream_bytes == 65536);
  CHECK(table.thresholds().cuda_direct_bytes == 256 * 1024);
  CHECK(table.thresholds().nccl_recursive_doubling_bytes == 4096);
  CHECK(table.thresholds().hierarchical_spread_bytes == std::size_t{1} << 62);
  CHECK(table.thresholds().hierarchical_piece_bytes == 131072);
  CHECK_THROWS_WITH(concord::detail::TuningTable::parse(
                        R"({"thresholds": {"shm_bytes": 1}, "rules": [{"max_ranks": null,
                            "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
                        "test"),
                    Catch::Matchers::Contains("unknown threshold \"shm_bytes\""));
  CHECK_THROWS_WITH(concord::detail::TuningTable::parse(
                        R"({"thresholds": {"cuda_direct_bytes": -1}, "rules": [{"max_ranks": null,
                            "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
                        "test"),
                    Catch::Matchers::Contains("thresholds.cuda_direct_bytes"));
  CHECK(built_in.cuda_peer_max_bytes == SIZE_MAX);  // every size, until measured on a GPU
  CHECK(built_in.cuda_peer_one_shot_bytes == 256 * 1024);
  CHECK(built_in.cuda_peer_blocks == 64);
  CHECK(built_in.cuda_peer_direct_bytes == 16u << 20);
  CHECK(built_in.cuda_unshared_staging_bytes == 2u << 20);
  const auto peer = concord::detail::TuningTable::parse(
      R"({"thresholds": {"cuda_peer_max_bytes": 1048576, "cuda_peer_one_shot_bytes": 4096,
                         "cuda_peer_blocks": 128, "cuda_unshared_staging_bytes": 0,
                         "cuda_peer_direct_bytes": 65536},
          "rules": [{"max_ranks": null, "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
      "test");
  CHECK(peer.thresholds().cuda_peer_max_bytes == 1048576);
  CHECK(peer.thresholds().cuda_peer_one_shot_bytes == 4096);
  CHECK(peer.thresholds().cuda_peer_blocks == 128);
  CHECK(peer.thresholds().cuda_unshared_staging_bytes == 0);
  CHECK(peer.thresholds().cuda_peer_direct_bytes == 65536);
  // The engine's fusion limits (64 MiB in a node, 4 MiB across nodes, 256 KiB alone).
  CHECK(built_in.fusion_bytes_one_node == std::size_t{64} << 20);
  CHECK(built_in.fusion_bytes_across_nodes == std::size_t{4} << 20);
  CHECK(built_in.fusion_in_place_bytes == std::size_t{256} << 10);
  const auto fusion = concord::detail::TuningTable::parse(
      R"({"thresholds": {"fusion_bytes_one_node": 1024, "fusion_bytes_across_nodes": 512,
                         "fusion_in_place_bytes": 0},
          "rules": [{"max_ranks": null, "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
      "test");
  CHECK(fusion.thresholds().fusion_bytes_one_node == 1024);
  CHECK(fusion.thresholds().fusion_bytes_across_nodes == 512);
  CHECK(fusion.thresholds().fusion_in_place_bytes == 0);
  // The flags hold 128 blocks: a kernel with more would meet in slots that do not exist.
  for (const char* blocks : {"0", "129"}) {
    INFO(blocks);
    CHECK_THROWS_WITH(concord::detail::TuningTable::parse(
                          std::string(R"({"thresholds": {"cuda_peer_blocks": )") + blocks +
                              R"(}, "rules": [{"max_ranks": null, "algorithms": [{"max_bytes":
                              null, "algorithm": "ring"}]}]})",
                          "test"),
                      Catch::Matchers::Contains("thresholds.cuda_peer_blocks must be in 1..128"));
  }
  // Past 1 TiB the piece arithmetic would overflow: refused, not wrong results.
  CHECK_THROWS_WITH(
      concord::detail::TuningTable::parse(
          R"({"thresholds": {"hierarchical_piece_bytes": 18446744073709551552},
                            "rules": [{"max_ranks": null,
                            "algorithms": [{"max_bytes": null, "algorithm": "ring"}]}]})",
          "test"),
      Catch::Matchers::Contains("thresholds.hierarchical_piece_bytes must be at most"));
}

// Hidden: run alone in a process whose environment names a tuning file
// (tests/CMakeLists.txt, unit_tuning_file_*), since the thresholds are read once.
// What this process's thresholds must hold comes from CONCORD_TEST_PIECE_BYTES.
TEST_CASE("the tuning file's thresholds reach the paths, the environment overrides them",
          "[.tuning_file]") {
  const char* expected = std::getenv("CONCORD_TEST_PIECE_BYTES");
  REQUIRE(expected != nullptr);
  REQUIRE(std::getenv("CONCORD_TUNING_FILE") != nullptr);
  CHECK(concord::detail::size_thresholds().hierarchical_piece_bytes ==
        std::stoull(std::string(expected)));
  CHECK(concord::detail::size_thresholds().shm_stream_bytes == 65536);  // from the file too
}

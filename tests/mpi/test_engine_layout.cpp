// The engine's bucket layout where buckets are packed (a flat algorithm): large
// tensors reduced alone where they lie, small ones through the fusion buffer,
// every one scaled as asked. The layout is read from the timeline, each
// bucket's REDUCE span naming its tensor count; the values are checked against
// a reference computed here. And where ranks share a node: a large bucket reduced
// in place takes the single-copy rounds, as one buffer of its bytes would.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "collectives/shared/path_counts.hpp"
#include "mpi/cma_probe.hpp"

#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

using namespace concord;

namespace {

// Each tensor's REDUCE detail in rank 0's trace ("bucket of 2 tensors, ...").
std::map<std::string, std::string> reduce_details(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::map<int, std::string> tracks;
  for (const auto& e : trace) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      tracks[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    }
  }
  std::map<std::string, std::string> details;
  for (const auto& e : trace) {
    if (e["ph"] == "X" && e["name"] == "REDUCE") {
      details[tracks.at(e["tid"].get<int>())] = e["args"]["detail"].get<std::string>();
    }
  }
  return details;
}

}  // namespace

TEST_CASE("packed buckets: a large tensor alone, the small ones around it together, all scaled",
          "[engine][fusion]") {
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  // Rank r holds r + 1 everywhere: the average is (ranks + 1) / 2, and with a
  // prescale of 2 and a postscale of 3 every result is 3 (ranks + 1).
  const float expected = 3.0f * static_cast<float>(ranks + 1);
  const float mine = static_cast<float>(comm.rank() + 1);
  for (const std::optional<std::size_t> in_place_bytes :
       {std::optional<std::size_t>{}, std::optional<std::size_t>{0}}) {
    INFO("fusion_in_place_bytes " << (in_place_bytes ? std::to_string(*in_place_bytes) : "unset"));
    const std::string path = fmt::format("/tmp/concord-layout-{}.json", getpid());
    std::vector<float> small1(100, mine), large(300 * 1024 / 4, mine), small2(50, mine);
    {
      EngineOptions options;
      options.cycle_time_ms = 0.5;
      options.algorithm = Algorithm::Ring;  // packed buckets
      options.fusion_in_place_bytes = in_place_bytes;
      options.timeline_path = path;
      Engine engine(comm, options);
      // One group: negotiated together, so planned in one cycle.
      auto handles =
          engine.enqueue_grouped_allreduce({"small1", "large", "small2"},
                                           {{small1.data(), small1.size(), DataType::Float32},
                                            {large.data(), large.size(), DataType::Float32},
                                            {small2.data(), small2.size(), DataType::Float32}},
                                           ReduceOp::Avg, 2.0, 3.0);
      for (auto& h : handles) h.wait();
    }
    for (const auto* v : {&small1, &large, &small2}) {
      for (float x : *v) {
        if (x != expected) {
          FAIL_CHECK("got " << x << ", expected " << expected << " (a tensor of " << v->size()
                            << " floats)");
          break;
        }
      }
    }
    if (comm.rank() != 0) continue;
    const auto details = reduce_details(path);
    std::remove(path.c_str());
    using Catch::Matchers::StartsWith;
    if (!in_place_bytes) {  // the default, 256 KiB: the 300 KiB tensor alone
      CHECK_THAT(details.at("large"), StartsWith("bucket of 1 tensors, 307200 bytes"));
      CHECK_THAT(details.at("small1"), StartsWith("bucket of 2 tensors, 600 bytes"));
      CHECK_THAT(details.at("small2"), StartsWith("bucket of 2 tensors, 600 bytes"));
    } else {  // 0: all three packed together
      for (const char* name : {"small1", "large", "small2"}) {
        INFO(name);
        CHECK_THAT(details.at(name), StartsWith("bucket of 3 tensors, 307800 bytes"));
      }
    }
  }
}

TEST_CASE("in-place buckets of scattered tensors take the single-copy rounds, scaled per tensor",
          "[engine][fusion]") {
  using concord::detail::shm_path_count;
  using concord::detail::ShmPath;
  Communicator comm = Communicator::world();
  const int ranks = comm.size();
  if (ranks < 2 || comm.num_nodes() != 1) return;  // needs 2 or more ranks on one node
  const bool cma = concord::test::host_allows_cross_memory_attach(comm.mpi_comm());
  // Tensors of odd sizes, each its own allocation (so every rank's lie elsewhere),
  // 1.3 MiB in all: one bucket, from the single-copy threshold up, several rounds.
  const std::vector<std::size_t> counts = {3, 70001, 1, 250000, 12345, 4097};
  const float mine = static_cast<float>(comm.rank() + 1);
  const float sum = static_cast<float>(ranks * (ranks + 1) / 2);
  EngineOptions options;
  options.cycle_time_ms = 0.5;
  Engine engine(comm, options);
  const std::uint64_t single_copy_before = shm_path_count(ShmPath::SingleCopy);
  // The path choice times both paths on a size class's first messages: several
  // steps, so single copy runs whichever it then keeps.
  for (int step = 0; step < 6; ++step) {
    INFO("step " << step);
    std::vector<std::vector<float>> tensors;
    std::vector<std::string> names;
    std::vector<TensorView> views;
    for (std::size_t t = 0; t < counts.size(); ++t) tensors.emplace_back(counts[t], mine);
    for (std::size_t t = 0; t < counts.size(); ++t) {
      names.push_back(fmt::format("scattered{}", t));
      views.push_back({tensors[t].data(), counts[t], DataType::Float32});
    }
    // Sum, and Avg with a prescale of 2 and a postscale of 0.5: the average.
    const bool avg = step % 2 == 1;
    auto handles = avg ? engine.enqueue_grouped_allreduce(names, views, ReduceOp::Avg, 2.0, 0.5)
                       : engine.enqueue_grouped_allreduce(names, views, ReduceOp::Sum);
    for (auto& h : handles) h.wait();
    const float expected = avg ? sum / static_cast<float>(ranks) : sum;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      for (std::size_t i = 0; i < counts[t]; ++i) {
        if (tensors[t][i] != Approx(expected).epsilon(1e-6)) {
          FAIL_CHECK("tensor " << t << " [" << i << "] = " << tensors[t][i] << ", expected "
                               << expected);
          break;
        }
      }
    }
  }
  if (cma) {
    CHECK(shm_path_count(ShmPath::SingleCopy) > single_copy_before);
  } else {
    WARN("the host forbids cross-memory attach: single copy not checked");
  }
}

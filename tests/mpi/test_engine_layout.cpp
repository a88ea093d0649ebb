// The engine's bucket layout where buckets are packed (a flat algorithm): large
// tensors reduced alone where they lie, small ones through the fusion buffer,
// every one scaled as asked. The layout is read from the timeline, each
// bucket's REDUCE span naming its tensor count; the values are checked against
// a reference computed here.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

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

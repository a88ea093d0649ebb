// The allreduce benchmark: every implementation measured size by size, interleaved.
#pragma once

#include "common/bench_options.hpp"

#include <concord/communicator.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace concord::bench {

struct Measurement {
  std::string impl;       // "concord", "mpi"
  std::string algorithm;  // concord's algorithm as requested ("auto", "ring", ...); "mpi" for MPI
  std::size_t bytes = 0;
  std::size_t count = 0;
  double avg_us = 0;  // mean over ranks of each rank's mean latency (OSU)
  double min_us = 0;  // min over ranks of the per-rank mean
  double max_us = 0;  // max over ranks of the per-rank mean
  int iterations = 0;
  int warmup = 0;                 // untimed calls per implementation before the rounds
  double busbw_gbps = 0;          // bytes/avg time * 2(p-1)/p, as nccl-tests
  std::optional<bool> validated;  // with -c: the checked calls matched the reference on every rank
};

// Runs the benchmark; calls `on_size` on rank 0 with the measurements of each size
// as soon as it is done. Returns all measurements (complete on rank 0; on the
// others only `validated` holds, agreed by all ranks). `context`, where given, gets
// what the run found of its device (DeviceBench::context(); empty on host buffers).
std::vector<Measurement> run_allreduce_bench(
    const AllreduceOptions& options, const Communicator& comm,
    const std::function<void(const std::vector<Measurement>&)>& on_size,
    nlohmann::json* context = nullptr);

}  // namespace concord::bench

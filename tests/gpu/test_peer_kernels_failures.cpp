// The device-synchronised kernels when a call cannot complete: a rank that never
// arrives is recorded on the device, not waited for; the concurrency probe, whose
// ranks' kernels meet (and one that never comes is recorded); and calls that break
// the kernels' rules, refused with the reason. The shared checks: peer_kernel_checks.hpp.
#include "gpu/peer_kernel_checks.hpp"

#include <concord/error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace peer_kernel_checks;

TEST_CASE("peer allreduce: a rank that never arrives is recorded, not waited for", "[gpu][peer]") {
  StreamHandle stream;
  const int absent = world_size() - 1;
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    Call call(1000, 0, 0);
    call.upload(1000, DataType::Float32, 1);
    if (world_rank() != absent) {
      cu::PeerAllreduce c = call.describe(1000, DataType::Float32, ReduceOp::Sum, 7);
      c.timeout_ns = 300'000'000;  // 0.3 s
      kernel.run(c, stream.s);
      ok(cudaStreamSynchronize(stream.s));
      CHECK(call.timeout->call == 7);
      CHECK(call.timeout->missing_ranks == (1u << absent));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

TEST_CASE("peer probe: the ranks' kernels meet, and one that never comes is recorded",
          "[gpu][peer]") {
  StreamHandle stream;
  Call call(64, 0, 0);
  cu::PeerProbeResult* result = nullptr;
  ok(cudaMallocHost(reinterpret_cast<void**>(&result), sizeof *result));
  cu::PeerProbe probe;
  probe.rank = world_rank();
  probe.ranks = world_size();
  for (int r = 0; r < probe.ranks; ++r) {
    probe.flags[r] = reinterpret_cast<cu::PeerFlags*>(call.arena->header(r));
  }
  probe.rounds = 8;
  probe.timeout_ns = kPatientNs;
  probe.result = result;
  *result = {};
  cu::peer_probe(probe, stream.s);
  ok(cudaStreamSynchronize(stream.s));
  CHECK(result->timeout.call == 0);
  CHECK(result->elapsed_ns > 0);
  // The probe counted its rounds as calls of block 0: an allreduce after it still meets.
  call.upload(37, DataType::Float32, 3);
  cu::one_shot_allreduce(call.describe(37, DataType::Float32, ReduceOp::Sum, 1), stream.s);
  ok(cudaStreamSynchronize(stream.s));
  CHECK(call.wrong(37, DataType::Float32, ReduceOp::Sum, 3) == 0);

  MPI_Barrier(MPI_COMM_WORLD);
  const int absent = world_size() - 1;
  if (world_rank() != absent) {
    *result = {};
    probe.timeout_ns = 200'000'000;  // 0.2 s
    cu::peer_probe(probe, stream.s);
    ok(cudaStreamSynchronize(stream.s));
    CHECK(result->timeout.call == 1);
    CHECK(result->timeout.missing_ranks == (1u << absent));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  cudaFreeHost(result);
}

TEST_CASE("peer allreduce: calls that break its rules are refused, naming why", "[gpu][peer]") {
  Call call(16, 0, 0);
  const auto refused = [](const Kernel& kernel, const cu::PeerAllreduce& c,
                          const std::string& why) {
    try {
      kernel.run(c, nullptr);
      FAIL(kernel.name << " accepted: " << why);
    } catch (const concord::Error& e) {
      CHECK(e.code() == concord::ErrorCode::InvalidArgument);
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
  };
  const int me = world_rank();
  for (const Kernel& kernel : kKernels) {
    INFO(kernel.name);
    const cu::PeerAllreduce good = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
    cu::PeerAllreduce c = good;
    c.ranks = cu::kMaxPeerRanks + 1;
    refused(kernel, c, "ranks 9 outside 1..8");
    c = call.describe(16, DataType::Float32, ReduceOp::Sum, 0);
    refused(kernel, c, "call 0");
    c = good;
    c.result = c.inputs[me];
    refused(kernel, c, "the result overlaps this rank's input buffer");
    c = good;
    c.source = static_cast<std::byte*>(c.inputs[me]) + 8;
    refused(kernel, c, "the source overlaps this rank's input buffer");
    c = good;
    c.timeout = nullptr;
    refused(kernel, c, "no timeout record");
    c = good;
    c.max_blocks = cu::kMaxPeerBlocks + 1;
    refused(kernel, c, "max_blocks 129 outside 1..128");
    c = good;
    c.dtype = static_cast<DataType>(99);
    refused(kernel, c, "out of range");
    c = good;
    c.flags[(me + 1) % world_size()] = nullptr;
    refused(kernel, c, "no flags of rank");
  }
  // A peer's output: two shot copies from it, one shot never reads it.
  const int peer = (me + 1) % world_size();
  cu::PeerAllreduce c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.outputs[peer] = nullptr;
  refused(kKernels[1], c, "null output of rank " + std::to_string(peer));
  c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.result = static_cast<std::byte*>(c.outputs[me]) + 4;
  refused(kKernels[1], c, "the result overlaps this rank's output buffer");
  // The direct kernel works on inputs and outputs only, whole or apart.
  const Kernel direct{"direct", cu::direct_allreduce};
  refused(direct, call.describe(16, DataType::Float32, ReduceOp::Sum, 1), "source or result given");
  c = call.describe(16, DataType::Float32, ReduceOp::Sum, 1);
  c.source = nullptr;
  c.result = nullptr;
  c.outputs[me] = static_cast<std::byte*>(c.inputs[me]) + 4;
  refused(direct, c, "this rank's output overlaps its input without being it");
}

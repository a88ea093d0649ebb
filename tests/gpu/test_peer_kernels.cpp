// The device-synchronised allreduce kernels (reduce/cuda_peer_kernels.hpp), one shot
// and two shot, and the concurrency probe, at 2 and 3 ranks, on one GPU or two: each
// rank's flags, input and output in a CUDA IPC arena (transport/cuda_ipc_arena.hpp,
// as the device path has them), its data in ordinary device memory. The
// expected values are computed here from the inputs' formula: small integers, exact
// in every dtype, folded in rank order; 16-bit floats are encoded and decoded here.
// The shared checks: peer_kernel_checks.hpp; failures and the probe:
// test_peer_kernels_failures.cpp.
#include "gpu/peer_kernel_checks.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

using namespace peer_kernel_checks;

TEST_CASE("peer allreduce: every dtype, op and size, aligned or not, wherever the data lies",
          "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t kMost = 70'001;  // several blocks of packs, and a tail
  for (const Kernel& kernel : kKernels) {
    for (const auto& [offset, user_offset] :
         {std::pair<std::size_t, std::size_t>{0, 0}, {4, 4}, {0, 4}}) {
      Call call(kMost, offset, user_offset);
      std::uint32_t number = 0;
      for (DataType d : {DataType::Int8, DataType::Int32, DataType::Float16, DataType::BFloat16,
                         DataType::Float32, DataType::Float64}) {
        if ((offset | user_offset) % concord::size_of(d) != 0) continue;
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4096}, kMost}) {
            for (Placement p : {Placement::InIpc, Placement::Separate, Placement::InPlace}) {
              INFO(kernel.name << ": " << concord::to_string(d) << " " << concord::to_string(op)
                               << " count " << count << " offsets " << offset << "/" << user_offset
                               << " " << name_of(p));
              const int k = static_cast<int>(++number);
              call.upload(count, d, k, p);
              kernel.run(call.describe(count, d, op, number, p), stream.s);
              ok(cudaStreamSynchronize(stream.s));
              CHECK(call.wrong(count, d, op, k, p) == 0);
            }
          }
        }
      }
      CHECK(call.timeout->call == 0);
    }
  }
}

TEST_CASE(
    "peer allreduce: calls back to back, both kernels and grids mixed, ranks at different "
    "paces",
    "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t counts[] = {5000, 37, 70'001, 1};  // 1 to several blocks
  Call call(70'001, 0, 0);
  for (int k = 1; k <= 32; ++k) {
    const Kernel& kernel = kKernels[k % 2];
    const std::size_t count = counts[(k / 2) % 4];
    INFO(kernel.name << ": call " << k << ", count " << count);
    // Ranks fall behind in turn: the others finish a call and start the next one
    // (publish its flags) while the late rank still works on this one.
    if (k % world_size() == world_rank()) usleep(2000);
    call.upload(count, DataType::Float32, k);
    kernel.run(call.describe(count, DataType::Float32, ReduceOp::Sum, k), stream.s);
    ok(cudaStreamSynchronize(stream.s));
    REQUIRE(call.wrong(count, DataType::Float32, ReduceOp::Sum, k) == 0);
  }
  CHECK(call.timeout->call == 0);
}

TEST_CASE("peer allreduce: calls queued without waiting keep their order and their data",
          "[gpu][peer]") {
  // Each call's input is written on the stream just before it, and its result copied
  // away just after: nothing waits for the GPU until the end.
  StreamHandle stream;
  constexpr std::size_t count = 3000;
  constexpr int calls = 12;
  Call call(count, 0, 0);
  const std::size_t bytes = count * sizeof(float);
  std::vector<float*> inputs(calls);
  std::vector<float*> results(calls);
  for (int k = 0; k < calls; ++k) {
    ok(cudaMalloc(reinterpret_cast<void**>(&inputs[k]), bytes));
    ok(cudaMalloc(reinterpret_cast<void**>(&results[k]), bytes));
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>(value(world_rank(), i, k));
    ok(cudaMemcpy(inputs[k], host.data(), bytes, cudaMemcpyHostToDevice));
  }
  ok(cudaDeviceSynchronize());
  for (int k = 0; k < calls; ++k) {
    ok(cudaMemcpyAsync(call.user_in, inputs[k], bytes, cudaMemcpyDeviceToDevice, stream.s));
    kKernels[k % 2].run(call.describe(count, DataType::Float32, ReduceOp::Sum, k + 1), stream.s);
    ok(cudaMemcpyAsync(results[k], call.user_out, bytes, cudaMemcpyDeviceToDevice, stream.s));
  }
  ok(cudaStreamSynchronize(stream.s));
  for (int k = 0; k < calls; ++k) {
    std::vector<float> got(count);
    ok(cudaMemcpy(got.data(), results[k], bytes, cudaMemcpyDeviceToHost));
    std::size_t bad = 0;
    for (std::size_t i = 0; i < count; ++i) {
      bad += got[i] != expected(ReduceOp::Sum, i, k, world_size());
    }
    INFO("call " << k + 1);
    CHECK(bad == 0);
    cudaFree(inputs[k]);
    cudaFree(results[k]);
  }
  CHECK(call.timeout->call == 0);
}

TEST_CASE("peer allreduce, direct: every dtype, op and size on the callers' own buffers",
          "[gpu][peer]") {
  StreamHandle stream;
  constexpr std::size_t kMost = 70'001;
  Call call(16, 0, 0);  // its flags and record
  Mapped buffers(kMost * 8 + 8);
  const int me = world_rank();
  std::uint32_t number = 0;
  for (std::size_t offset : {std::size_t{0}, std::size_t{4}}) {
    for (bool in_place : {false, true}) {
      for (DataType d : {DataType::Int8, DataType::Int32, DataType::Float16, DataType::BFloat16,
                         DataType::Float32, DataType::Float64}) {
        if (offset % concord::size_of(d) != 0) continue;
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max}) {
          for (std::size_t count : {std::size_t{1}, std::size_t{37}, std::size_t{4096}, kMost}) {
            INFO(concord::to_string(d) << " " << concord::to_string(op) << " count " << count
                                       << " offset " << offset << (in_place ? " in place" : ""));
            const int k = static_cast<int>(++number);
            cu::PeerAllreduce c = call.describe(count, d, op, number);
            c.source = nullptr;
            c.result = nullptr;
            for (int r = 0; r < c.ranks; ++r) {
              c.inputs[r] = buffers.sends[r] + offset;
              c.outputs[r] = (in_place ? buffers.sends[r] : buffers.recvs[r]) + offset;
            }
            std::vector<std::byte> host(count * concord::size_of(d));
            for (std::size_t i = 0; i < count; ++i) {
              put(d, host.data() + i * concord::size_of(d), value(me, i, k));
            }
            ok(cudaMemcpy(c.inputs[me], host.data(), host.size(), cudaMemcpyHostToDevice));
            ok(cudaDeviceSynchronize());
            MPI_Barrier(MPI_COMM_WORLD);  // every rank's input is there before any kernel
            cu::direct_allreduce(c, stream.s);
            ok(cudaStreamSynchronize(stream.s));
            ok(cudaMemcpy(host.data(), c.outputs[me], host.size(), cudaMemcpyDeviceToHost));
            std::size_t bad = 0;
            for (std::size_t i = 0; i < count; ++i) {
              bad +=
                  get(d, host.data() + i * concord::size_of(d)) != expected(op, i, k, world_size());
            }
            CHECK(bad == 0);
            MPI_Barrier(MPI_COMM_WORLD);  // no rank overwrites an input a peer still reads
          }
        }
      }
    }
  }
  CHECK(call.timeout->call == 0);
  // Its calls count on the same flags as the other kernels': they mix.
  for (int k = 1; k <= 6; ++k) {
    INFO("mixed call " << k);
    call.upload(16, DataType::Float32, 100 + k);
    kKernels[k % 2].run(call.describe(16, DataType::Float32, ReduceOp::Sum, ++number), stream.s);
    ok(cudaStreamSynchronize(stream.s));
    CHECK(call.wrong(16, DataType::Float32, ReduceOp::Sum, 100 + k) == 0);
  }
}

// The pieces `concord-bench kernels` shares between its two measurements
// (kernels_reduce.cpp, kernels_model.cpp): the table layout, interleaved timing
// with CUDA events, test data and host/device copies. CUDA builds only.
#pragma once

#include "kernels/kernels_plan.hpp"

#include "cuda/cuda_runtime.hpp"

#include <concord/types.hpp>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace concord::bench::gpu_kernels {

namespace cuda = concord::detail::cuda;

// OSU layout, as the other tables: sizes left-aligned in 10 columns, values in 18.
constexpr int kSizeWidth = 10;
constexpr int kFieldWidth = 18;
// Each timed sample repeats the call until it has moved this many bytes (at most
// kMaxReps calls), so launch jitter and the events' resolution stay small against it.
constexpr std::size_t kSampleBytes = std::size_t{256} << 20;
constexpr int kMaxReps = 1000;

double median(std::vector<double> v);

// Median seconds per call of `a` and of `b` (each enqueues work on `stream`; its
// argument is the call's index within a sample), over `samples` samples of `reps_a`
// and `reps_b` calls, timed by events around each sample. The samples alternate
// (a b, b a, a b, ...) so that clock or thermal drift during the run falls on both.
template <class CallA, class CallB>
std::pair<double, double> interleaved_medians(cudaStream_t stream, const CallA& a, int reps_a,
                                              const CallB& b, int reps_b, int samples, int warmup) {
  for (int i = 0; i < warmup; ++i) {
    a(i);
    b(i);
  }
  cuda::Event start(true);
  cuda::Event stop(true);
  const auto sample = [&](const auto& call, int reps) {
    start.record(stream);
    for (int r = 0; r < reps; ++r) call(r);
    stop.record(stream);
    stop.synchronize();
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3 / reps;
  };
  std::vector<double> per_call_a, per_call_b;
  for (int s = 0; s < samples; ++s) {
    if (s % 2 == 0) {
      per_call_a.push_back(sample(a, reps_a));
      per_call_b.push_back(sample(b, reps_b));
    } else {
      per_call_b.push_back(sample(b, reps_b));
      per_call_a.push_back(sample(a, reps_a));
    }
  }
  return {median(per_call_a), median(per_call_b)};
}

std::size_t l2_cache_bytes();
// Calls per timed sample for a call that moves `traffic_bytes`.
int reps_for(std::size_t traffic_bytes);

// `count` elements of finite values (no NaN, no inf), so every result compares bit
// for bit with the host without arguing about NaN payloads.
std::vector<std::byte> random_elements(DataType d, std::size_t count, std::uint64_t seed);

void upload(void* dst, const std::vector<std::byte>& src);
// Fills `bytes` of device memory with copies of `src`, one after another.
void upload_tiled(std::byte* dst, std::size_t bytes, const std::vector<std::byte>& src);
std::vector<std::byte> download(const void* src, std::size_t bytes);

// "GPU <n> (<name>, <SMs> SMs)", for the tables' first line.
std::string device_description();

// (a) reduce vs cudaMemcpyAsync by size (kernels_reduce.cpp); (b) a model's
// gradients packed into one fusion buffer and back (kernels_model.cpp). Each
// prints its table, appends its JSON records and returns false when a result
// was wrong.
bool run_reduce(const KernelsArgs& a, const KernelsPlan& p, nlohmann::json& records);
bool run_model(const KernelsArgs& a, const KernelsPlan& p, nlohmann::json& records);

}  // namespace concord::bench::gpu_kernels

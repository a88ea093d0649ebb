#include "kernels/kernels_gpu.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

namespace concord::bench {
namespace gpu_kernels {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::size_t l2_cache_bytes() {
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return static_cast<std::size_t>(std::max(prop.l2CacheSize, 0));
}

int reps_for(std::size_t traffic_bytes) {
  return static_cast<int>(
      std::clamp<std::size_t>(kSampleBytes / std::max<std::size_t>(traffic_bytes, 1), 1, kMaxReps));
}

std::vector<std::byte> random_elements(DataType d, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(count * size_of(d));
  std::byte* p = out.data();
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t r = rng();
    switch (d) {
      case DataType::Float16:
      case DataType::BFloat16: {
        const std::uint16_t inf = d == DataType::Float16 ? 0x7c00 : 0x7f80;
        auto v = static_cast<std::uint16_t>(r);
        if ((v & inf) == inf) v ^= 0x4000;  // inf/NaN exponent: make it finite
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case DataType::Float32: {
        const auto v = static_cast<float>((static_cast<double>(r >> 11) * 0x1p-53 - 0.5) * 2000.0);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case DataType::Float64: {
        const double v = (static_cast<double>(r >> 11) * 0x1p-53 - 0.5) * 2000.0;
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      default:
        std::memcpy(p + i * size_of(d), &r, size_of(d));
    }
  }
  return out;
}

void upload(void* dst, const std::vector<std::byte>& src) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  // Returns before the data lands (pageable source, legacy stream): the kernels'
  // non-blocking stream must not start before it has.
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void upload_tiled(std::byte* dst, std::size_t bytes, const std::vector<std::byte>& src) {
  for (std::size_t at = 0; at < bytes; at += src.size()) {
    cuda::check(
        cudaMemcpy(dst + at, src.data(), std::min(src.size(), bytes - at), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  }
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::vector<std::byte> download(const void* src, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  cuda::check(cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

std::string device_description() {
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return fmt::format("GPU {} ({}, {} SMs)", device, prop.name, prop.multiProcessorCount);
}

namespace {

void write_json(const std::string& path, const nlohmann::json& records) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--json: cannot write " + path);
  out << records.dump(1) << "\n";
}

}  // namespace
}  // namespace gpu_kernels

int measure_kernels(const KernelsArgs& a, const KernelsPlan& p) {
  std::string why;
  if (gpu_kernels::cuda::device_count(&why) == 0) {
    throw std::runtime_error("kernels: no CUDA device (" + why + ")");
  }
  nlohmann::json records = nlohmann::json::array();
  const bool ok = a.model_path.empty() ? gpu_kernels::run_reduce(a, p, records)
                                       : gpu_kernels::run_model(a, p, records);
  if (!a.json_path.empty()) gpu_kernels::write_json(a.json_path, records);
  if (!ok) {
    fmt::print(stderr, "concord-bench: validation FAILED\n");
    return 3;
  }
  return 0;
}

}  // namespace concord::bench

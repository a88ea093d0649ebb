// What the tests of the device-synchronised path share: uploads and downloads, inputs
// whose sums over ranks are exact in float, and the path a communicator's node takes.
#pragma once

#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "cuda/cuda_runtime.hpp"
#include "device/device_resources.hpp"
#include "dispatch/device_peer_path.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace concord::test {

namespace cuda = concord::detail::cuda;

inline void upload(float* dst, const std::vector<float>& src) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy");
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // pageable uploads return early
}
inline std::vector<float> download(const float* src, std::size_t n) {
  std::vector<float> out(n);
  cuda::check(cudaMemcpy(out.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

// Rank r's element i for tag k, and the sum over ranks: small integers, exact in float.
inline float value(int rank, std::size_t i, int k) {
  return static_cast<float>((i % 13) + static_cast<std::size_t>(rank) * 3 + k);
}
inline std::size_t wrong_sums(const std::vector<float>& got, int ranks, int k,
                              float factor = 1.0f) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    float sum = 0;
    for (int r = 0; r < ranks; ++r) sum += value(r, i, k);
    bad += got[i] != sum * factor ? 1 : 0;
  }
  return bad;
}
inline std::vector<float> inputs(int rank, std::size_t n, int k) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value(rank, i, k);
  return v;
}

// The path of `comm`'s node after one call on `stream` (which sets it up), or null.
inline const detail::DevicePeerPath* peer_path(const Communicator& comm, cudaStream_t stream) {
  cuda::DeviceBuffer one(sizeof(float));
  AllreduceOptions options;
  options.stream = stream;
  allreduce(one.get(), one.get(), 1, DataType::Float32, ReduceOp::Sum, comm, options);
  cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const auto& res = comm.state().device_resources;
  return res ? res->peer.get() : nullptr;
}

// The tests of the path itself need it: where it is not in use, say why and stop.
inline void require_peer_path(const Communicator& comm, cudaStream_t stream) {
  const detail::DevicePeerPath* path = peer_path(comm, stream);
  INFO("probe: mean meeting " << (path ? path->probe_meeting_ns : 0) << " ns");
  REQUIRE(path != nullptr);
  REQUIRE(path->concurrent);
}

inline bool one_node(const Communicator& comm) {
  return comm.local_size() == comm.size() && comm.size() >= 2;
}

}  // namespace concord::test

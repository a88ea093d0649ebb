// The engine's collectives besides allreduce (buckets.cpp): broadcast, allgather,
// alltoall and reducescatter (the shapes Horovod gives them). A join completes in
// the negotiation (negotiator_join.cpp); here it only ends.
#include "engine/engine_core.hpp"

#include "device/device_path.hpp"
#include "dispatch/dispatch.hpp"
#include "reduce/reduce_kernels.hpp"

#include <concord/allreduce.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace concord::detail {

const char* phase_name(WorkKind kind) {
  switch (kind) {
    case WorkKind::Allreduce:
      return "REDUCE";
    case WorkKind::Broadcast:
      return "BROADCAST";
    case WorkKind::Allgather:
      return "ALLGATHER";
    case WorkKind::Alltoall:
      return "ALLTOALL";
    case WorkKind::Reducescatter:
      return "REDUCESCATTER";
    case WorkKind::Join:
      return "JOIN";
  }
  return "?";
}

std::vector<std::size_t> reducescatter_rows(std::uint64_t rows, int ranks) {
  const auto p = static_cast<std::uint64_t>(ranks);
  std::vector<std::size_t> blocks(static_cast<std::size_t>(ranks));
  for (std::uint64_t r = 0; r < p; ++r) blocks[r] = rows / p + (r < rows % p ? 1 : 0);
  return blocks;
}

void EngineCore::run_one(Work& w) {
  switch (w.sig.kind) {
    case WorkKind::Broadcast:
      return run_broadcast(w);
    case WorkKind::Allgather:
      return run_allgather(w);
    case WorkKind::Alltoall:
      return run_alltoall(w);
    case WorkKind::Reducescatter:
      return run_reducescatter(w);
    case WorkKind::Join:
      return;  // agreed by every rank: its output was set by the negotiation
    case WorkKind::Allreduce:
      break;
  }
  throw Error(ErrorCode::Internal, data_.rank(), "Engine: run_one on an allreduce");
}

void EngineCore::run_alltoall(Work& w) {
  const auto ranks = static_cast<std::size_t>(data_.size());
  const auto me = static_cast<std::size_t>(data_.rank());
  // Every rank's send_rows: matrix[r * ranks + q] rows go from r to q.
  std::vector<std::uint64_t> matrix(ranks * ranks);
  dispatch_allgatherv(w.send_rows.data(), matrix.data(),
                      std::vector<std::size_t>(ranks, ranks * sizeof(std::uint64_t)), data_);
  // Sizes checked for every destination, so every rank fails alike, or none.
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  const std::size_t esize = size_of(w.sig.dtype);
  const auto too_large = [&] {
    return Error(
        ErrorCode::InvalidArgument, data_.rank(),
        fmt::format("Engine: tensor '{}': the rows some rank receives overflow in bytes", w.name));
  };
  if (w.sig.count > kMax / esize) throw too_large();
  const std::size_t row_bytes = w.sig.count * esize;
  for (std::size_t q = 0; q < ranks; ++q) {
    std::size_t total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::uint64_t rows = matrix[r * ranks + q];
      if (row_bytes != 0 && rows > kMax / row_bytes) throw too_large();
      if (rows * row_bytes > kMax - total) throw too_large();
      total += rows * row_bytes;
    }
  }
  std::vector<std::size_t> send_bytes(ranks);
  std::vector<std::size_t> recv_bytes(ranks);
  std::vector<std::size_t> recv_rows(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    send_bytes[r] = w.send_rows[r] * row_bytes;
    recv_rows[r] = matrix[r * ranks + me];
    recv_bytes[r] = recv_rows[r] * row_bytes;
  }
  std::vector<std::byte> out(std::accumulate(recv_bytes.begin(), recv_bytes.end(), std::size_t{0}));
  dispatch_alltoallv(w.tensor.data, send_bytes, out.data(), recv_bytes, data_);
  w.output = std::move(out);
  w.first_dims = std::move(recv_rows);
}

void EngineCore::run_reducescatter(Work& w) {
  const std::size_t esize = size_of(w.sig.dtype);
  const std::size_t row_bytes = w.sig.row_elements * esize;
  const std::vector<std::size_t> blocks =
      reducescatter_rows(w.sig.count / w.sig.row_elements, data_.size());
  const auto me = static_cast<std::size_t>(data_.rank());
  const std::size_t first_row =
      std::accumulate(blocks.begin(), blocks.begin() + me, std::size_t{0});
  // The whole tensor is reduced (one allreduce, the engine's algorithms), then
  // this rank keeps its rows; the caller's tensor stays as it was.
  std::vector<std::byte> reduced(w.tensor.count * esize);
  if (!reduced.empty()) std::memcpy(reduced.data(), w.tensor.data, reduced.size());
  if (w.sig.prescale != 1.0) scale(reduced.data(), w.tensor.count, w.sig.dtype, w.sig.prescale);
  if (w.tensor.count != 0) {
    AllreduceOptions options;
    options.algorithm = algorithm_;
    options.device = Device::Cpu;
    const ReduceOp op = w.sig.op == ReduceOp::Avg ? ReduceOp::Sum : w.sig.op;
    dispatch_allreduce("reducescatter", reduced.data(), reduced.data(), w.tensor.count, w.sig.dtype,
                       op, data_, options);
  }
  std::vector<std::byte> mine(
      reduced.begin() + static_cast<std::ptrdiff_t>(first_row * row_bytes),
      reduced.begin() + static_cast<std::ptrdiff_t>((first_row + blocks[me]) * row_bytes));
  const double factor = output_scale(w.sig, data_.size());
  if (factor != 1.0) scale(mine.data(), blocks[me] * w.sig.row_elements, w.sig.dtype, factor);
  w.output = std::move(mine);
  w.first_dims = blocks;
}

void EngineCore::run_broadcast(Work& w) {
  const std::size_t bytes = w.tensor.count * size_of(w.sig.dtype);
  if (data_.size() == 1 || bytes == 0) return;
  if (w.sig.device == Device::Cuda) {
    // Broadcasts are rare (initial weights): through host memory.
    std::vector<std::byte> host(bytes);
    if (data_.rank() == w.sig.root) copy_device_to_host(host.data(), w.tensor.data, bytes, w.ready);
    dispatch_broadcast(host.data(), bytes, w.sig.root, data_);
    if (data_.rank() != w.sig.root) {
      copy_host_to_device(w.tensor.data, host.data(), bytes, w.ready);
    }
    return;
  }
  dispatch_broadcast(w.tensor.data, bytes, w.sig.root, data_);
}

void EngineCore::run_allgather(Work& w) {
  const auto ranks = static_cast<std::size_t>(data_.size());
  std::vector<std::uint64_t> dims(ranks);
  const std::uint64_t mine = w.tensor.count / w.sig.count;
  dispatch_allgatherv(&mine, dims.data(), std::vector<std::size_t>(ranks, sizeof(std::uint64_t)),
                      data_);
  // Sizes from every rank's rows: the same on every rank, and so is a failure.
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  auto too_large = [&] {
    return Error(ErrorCode::InvalidArgument, data_.rank(),
                 fmt::format("Engine: tensor '{}': the gathered size in bytes overflows", w.name));
  };
  const std::size_t esize = size_of(w.sig.dtype);
  if (w.sig.count > kMax / esize) throw too_large();
  const std::size_t row_bytes = w.sig.count * esize;
  std::vector<std::size_t> block_bytes(ranks);
  std::size_t total = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    if (row_bytes != 0 && dims[r] > kMax / row_bytes) throw too_large();
    block_bytes[r] = dims[r] * row_bytes;
    if (block_bytes[r] > kMax - total) throw too_large();
    total += block_bytes[r];
  }
  std::vector<std::byte> out(total);
  const void* mine_rows = w.tensor.data;
  std::vector<std::byte> staged;  // device tensors: gathered on the host (Handle::output)
  if (w.sig.device == Device::Cuda) {
    staged.resize(block_bytes[static_cast<std::size_t>(data_.rank())]);
    copy_device_to_host(staged.data(), w.tensor.data, staged.size(), w.ready);
    mine_rows = staged.data();
  }
  dispatch_allgatherv(mine_rows, out.data(), block_bytes, data_);
  w.output = std::move(out);
  w.first_dims.assign(dims.begin(), dims.end());
}

}  // namespace concord::detail

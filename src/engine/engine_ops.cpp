// The engine's collectives besides allreduce, broadcast and allgather: alltoall
// and reducescatter (the shapes Horovod gives them), and their argument checks.
// A join completes in the negotiation (negotiator_join.cpp); here it only ends.
#include "engine/engine_core.hpp"

#include "dispatch/dispatch.hpp"
#include "reduce/reduce_kernels.hpp"

#include <concord/allreduce.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <limits>
#include <numeric>

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

void EngineCore::validate_rows(const Work& w) const {
  auto bad = [&](const std::string& what) { reject(w, what); };
  if (w.sig.kind == WorkKind::Join) return;
  const bool alltoall = w.sig.kind == WorkKind::Alltoall;
  if (w.tensor.device != Device::Cpu) {
    bad(fmt::format("{} takes host tensors only", kind_name(w.sig.kind)));
  }
  const std::uint64_t row = alltoall ? w.sig.count : w.sig.row_elements;
  if (row == 0) bad("row_elements must be > 0");
  if (w.tensor.count % row != 0) {
    bad(fmt::format("count {} is not a multiple of row_elements {}", w.tensor.count, row));
  }
  const std::uint64_t rows = w.tensor.count / row;
  if (alltoall) {
    if (w.send_rows.size() != static_cast<std::size_t>(data_.size())) {
      bad(fmt::format("alltoall needs one send_rows entry per rank ({}), got {}", data_.size(),
                      w.send_rows.size()));
    }
    std::uint64_t sum = 0;
    for (std::uint64_t n : w.send_rows) {
      if (n > rows - sum)
        bad(fmt::format("send_rows {} add up to more than the tensor's {} rows",
                        fmt::join(w.send_rows, ","), rows));
      sum += n;
    }
    if (sum != rows) {
      bad(fmt::format("send_rows {} add up to {}, but the tensor has {} rows",
                      fmt::join(w.send_rows, ","), sum, rows));
    }
    return;
  }
  validate_reduction(w);
}

// The op and scales of a reduction (allreduce, reducescatter).
void EngineCore::validate_reduction(const Work& w) const {
  auto bad = [&](const std::string& what) { reject(w, what); };
  if (static_cast<unsigned>(w.sig.op) > static_cast<unsigned>(ReduceOp::Avg)) {
    bad("unknown ReduceOp");
  }
  if (!is_supported(w.sig.dtype, w.sig.op)) {
    bad(fmt::format("{} is not defined for {}", to_string(w.sig.op), to_string(w.sig.dtype)));
  }
  if (!is_floating_point(w.sig.dtype) && (w.sig.prescale != 1.0 || w.sig.postscale != 1.0)) {
    bad("prescale/postscale must be 1 for integer tensors");
  }
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

}  // namespace concord::detail

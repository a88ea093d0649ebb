// What the engine accepts: a tensor's arguments checked on submit, on the caller's
// thread, so a bad call fails there and never reaches the other ranks.
#include "engine/engine_core.hpp"

#include "core/validate.hpp"
#include "device/device_path.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <limits>
#include <string>

namespace concord::detail {

void EngineCore::reject(const Work& w, const std::string& what) const {
  throw Error(ErrorCode::InvalidArgument, data_.rank(),
              fmt::format("Engine: tensor '{}': {}", w.name, what));
}

void EngineCore::validate(const Work& w) const {
  const int rank = data_.rank();
  auto bad = [&](const std::string& what) { reject(w, what); };
  if (w.name.empty()) bad("the name is empty");
  if (w.tensor.device != Device::Cpu && w.tensor.device != Device::Cuda) bad("unknown Device");
  if (w.tensor.device == Device::Cuda) {
    require_cuda(fmt::format("Engine: tensor '{}'", w.name).c_str(), rank);
  }
  if (w.tensor.data == nullptr && w.tensor.count > 0) bad("null data with count > 0");
  if (!known(w.sig.dtype)) bad("unknown DataType");
  if (w.tensor.count > std::numeric_limits<std::size_t>::max() / size_of(w.sig.dtype)) {
    bad(fmt::format("count {} is too large: its size in bytes overflows", w.tensor.count));
  }
  if ((w.name == kJoinName) != (w.sig.kind == WorkKind::Join)) {
    bad(fmt::format("the name '{}' is reserved for join", kJoinName));
  }
  switch (w.sig.kind) {
    case WorkKind::Alltoall:
    case WorkKind::Reducescatter:
    case WorkKind::Join:
      validate_rows(w);
      break;
    case WorkKind::Allreduce:
      validate_reduction(w);
      break;
    case WorkKind::Broadcast:
      if (w.sig.root < 0 || w.sig.root >= data_.size()) {
        bad(fmt::format("root {} is not a rank of this engine (size {})", w.sig.root,
                        data_.size()));
      }
      break;
    case WorkKind::Allgather:
      if (w.sig.count == 0) bad("row_elements must be > 0");
      if (w.tensor.count % w.sig.count != 0) {
        bad(fmt::format("count {} is not a multiple of row_elements {}", w.tensor.count,
                        w.sig.count));
      }
      break;
  }
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
  if (!known(w.sig.op)) bad("unknown ReduceOp");
  if (!is_supported(w.sig.dtype, w.sig.op)) {
    bad(fmt::format("{} is not defined for {}", to_string(w.sig.op), to_string(w.sig.dtype)));
  }
  if (!is_floating_point(w.sig.dtype) && (w.sig.prescale != 1.0 || w.sig.postscale != 1.0)) {
    bad("prescale/postscale must be 1 for integer tensors");
  }
}

}  // namespace concord::detail

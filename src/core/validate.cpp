#include "core/validate.hpp"

#include "core/agreement.hpp"
#include "core/communicator_state.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <vector>

namespace concord::detail {
namespace {

std::string describe(const CallSignature& s) {
  return fmt::format("count={}, dtype={}, op={}, algorithm={}, device={}, ring_segment_bytes={}",
                     s.count, to_string(static_cast<DataType>(s.dtype)),
                     to_string(static_cast<ReduceOp>(s.op)),
                     to_string(static_cast<Algorithm>(s.algorithm)),
                     to_string(static_cast<Device>(s.device)), s.ring_segment_bytes);
}

}  // namespace

bool known(DataType dtype) {
  return static_cast<int>(dtype) >= 0 &&
         static_cast<int>(dtype) <= static_cast<int>(DataType::Float64);
}
bool known(ReduceOp op) {
  return static_cast<int>(op) >= 0 && static_cast<int>(op) <= static_cast<int>(ReduceOp::Avg);
}
bool known(Algorithm algorithm) {
  return static_cast<int>(algorithm) >= 0 &&
         static_cast<int>(algorithm) <= static_cast<int>(Algorithm::Hierarchical);
}

void validate_buffers(const char* what, const void* send, const void* recv, std::size_t count,
                      DataType dtype, ReduceOp op, int rank) {
  auto fail = [&](const std::string& cause) {
    throw Error(ErrorCode::InvalidArgument, rank, fmt::format("{}: {}", what, cause));
  };
  if (!known(dtype)) fail(fmt::format("unknown DataType value {}", static_cast<int>(dtype)));
  if (!known(op)) fail(fmt::format("unknown ReduceOp value {}", static_cast<int>(op)));
  if (!is_supported(dtype, op)) {
    fail(
        fmt::format("op {} is not defined for dtype {}: average needs a floating-point type "
                    "(reduce with sum and divide instead)",
                    to_string(op), to_string(dtype)));
  }
  if (count == 0) return;
  if (send == nullptr) fail(fmt::format("send buffer is null but count is {}", count));
  if (recv == nullptr) fail(fmt::format("recv buffer is null but count is {}", count));
  const std::size_t esize = size_of(dtype);
#if MPI_VERSION >= 4
  const std::size_t max_bytes = PTRDIFF_MAX;
#else
  const std::size_t max_bytes = INT_MAX;
#endif
  if (count > max_bytes / esize) {
    fail(
        fmt::format("count {} of {} ({} bytes each) exceeds the {} bytes MPI can address in one "
                    "buffer",
                    count, to_string(dtype), esize, max_bytes));
  }
  const std::size_t bytes = count * esize;
  const auto s = reinterpret_cast<std::uintptr_t>(send);
  const auto r = reinterpret_cast<std::uintptr_t>(recv);
  if (s != r && s < r + bytes && r < s + bytes) {
    fail(
        "send and recv buffers overlap without being the same buffer; pass the same pointer "
        "for in-place or use disjoint buffers");
  }
}

std::string describe_call(const char* what, std::string_view label) {
  return label.empty() ? std::string(what) : fmt::format("{} ({})", what, label);
}

SignatureRow signature_row(const CallSignature& mine, bool locally_valid) {
  return {static_cast<std::int64_t>(mine.count),
          mine.dtype,
          mine.op,
          mine.algorithm,
          mine.device,
          mine.ring_segment_bytes,
          locally_valid ? 1 : 0};
}

void judge_signatures(const char* what, std::string_view label,
                      const std::vector<SignatureRow>& rows, bool locally_valid, int rank) {
  const std::string call = describe_call(what, label);
  auto signature_of = [&](const SignatureRow& v) {
    return CallSignature{static_cast<std::uint64_t>(v[0]), v[1], v[2], v[3], v[4], v[5]};
  };
  std::vector<int> failed;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].back() == 0) failed.push_back(static_cast<int>(r));
  }
  if (!failed.empty()) {
    if (!locally_valid) return;  // the caller throws its own, more precise error
    throw Error(ErrorCode::Mismatch, rank,
                fmt::format("{}: rank(s) {} rejected their arguments (see the error on those "
                            "ranks); no data was moved",
                            call, fmt::join(failed, ", ")));
  }
  const CallSignature reference = signature_of(rows.at(0));
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const CallSignature other = signature_of(rows[r]);
    if (other.count != reference.count || other.dtype != reference.dtype ||
        other.op != reference.op || other.algorithm != reference.algorithm ||
        other.device != reference.device ||
        other.ring_segment_bytes != reference.ring_segment_bytes) {
      throw Error(ErrorCode::Mismatch, rank,
                  fmt::format("{}: ranks disagree: rank {} passed {}, but rank 0 passed {}; no "
                              "data was moved",
                              call, r, describe(other), describe(reference)));
    }
  }
}

void check_agreement(const char* what, const CallSignature& mine, bool locally_valid,
                     const Communicator& comm) {
  // Waits like the set-up collectives: a rank that never comes to the call
  // fails the others at the transport's deadline, and an abort stops them.
  const SetupWait wait{"the CONCORD_CHECK_ARGS check", &comm.state().abort_signal};
  const std::vector<SignatureRow> all =
      gather_over_ranks(comm.mpi_comm(), signature_row(mine, locally_valid), comm.rank(), wait);
  judge_signatures(what, {}, all, locally_valid, comm.rank());
}

}  // namespace concord::detail

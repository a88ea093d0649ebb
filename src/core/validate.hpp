// Argument checks shared by the collectives' public entry points.
#pragma once

#include <concord/communicator.hpp>
#include <concord/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace concord::detail {

// What every rank passed to one collective call; compared across ranks when
// CONCORD_CHECK_ARGS=1.
struct CallSignature {
  std::uint64_t count;
  std::int64_t dtype;
  std::int64_t op;
  std::int64_t algorithm;   // as resolved, so ranks disagreeing on configuration are caught too
  std::int64_t device = 0;  // Device: host and device buffers cannot meet in one collective
  std::int64_t ring_segment_bytes = 0;  // as resolved: ranks cutting ring pieces differently
                                        // would post receives of the wrong sizes
};

// Whether a value is one of its enum's (one cast from an int, as a C caller or a
// binding may pass, need not be).
bool known(DataType dtype);
bool known(ReduceOp op);
bool known(Algorithm algorithm);

// Throws Error(InvalidArgument) for null buffers with count > 0, unknown enum
// values, an op the dtype does not support, byte counts MPI cannot address, and
// send/recv ranges that overlap without being identical.
void validate_buffers(const char* what, const void* send, const void* recv, std::size_t count,
                      DataType dtype, ReduceOp op, int rank);

// A signature as ranks exchange it: its fields, then 1 where the rank's own
// validation passed (0 where it failed).
using SignatureRow = std::array<std::int64_t, 7>;
SignatureRow signature_row(const CallSignature& mine, bool locally_valid);

// How errors name a call: `what`, then `label` in parentheses where there is one.
std::string describe_call(const char* what, std::string_view label);

// Given every rank's row, in rank order: throws Error(Mismatch) where some rank
// failed its validation (unless this one did too: the caller throws its own) or
// a signature differs from rank 0's, naming the ranks and both values. Every rank
// that judges the same rows decides the same. `label` (may be empty) names the
// call after `what`.
void judge_signatures(const char* what, std::string_view label,
                      const std::vector<SignatureRow>& rows, bool locally_valid, int rank);

// Collective: every rank shares its signature and whether its own validation
// failed. Throws on every rank (Error(Mismatch)) if any rank failed or any
// signature differs from rank 0's, naming the ranks and both values. The
// caller then rethrows its own local error, if any. Waits at most
// CONCORD_TRANSPORT_TIMEOUT_S (Error(Timeout)) and no longer than an abort
// (Error(Shutdown)); either leaves the ranks out of step, so the caller fails
// the communicator.
void check_agreement(const char* what, const CallSignature& mine, bool locally_valid,
                     const Communicator& comm);

}  // namespace concord::detail

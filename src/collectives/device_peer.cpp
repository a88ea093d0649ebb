#include "collectives/device_peer.hpp"

#include "core/mpi_wait.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace concord::detail {
namespace {

std::string bound_text(std::uint64_t ns) {
  return ns == UINT64_MAX ? "without a bound"
                          : fmt::format("{:g} s", static_cast<double>(ns) / 1e9);
}

std::string bound_clause(const PeerSpace& space) {
  return fmt::format(" (each wait bounded at {}, CONCORD_TRANSPORT_TIMEOUT_S)",
                     bound_text(space.timeout_ns));
}

// The communicator's rank of the arena's rank `local`.
int comm_rank_of(const PeerSpace& space, std::uint32_t local) {
  return local < space.comm_ranks.size() ? space.comm_ranks[local] : static_cast<int>(local);
}

// Every timeout of the path, as the next call or wait on the communicator reports it.
Error peer_timeout_error(int rank, std::uint32_t call, const std::string& what,
                         const std::string& bound) {
  return Error(ErrorCode::Timeout, rank,
               fmt::format("device allreduce call {} on this communicator: {}{}; the "
                           "communicator has failed, and the outputs of that call and of any "
                           "later one are unspecified",
                           call, what, bound));
}

// Who meets whom through the arena's flags, as the calls and the probe both say it.
template <class Meeting>
void meet_through(const SharedArena& arena, Meeting& m) {
  m.rank = arena.rank();
  m.ranks = arena.size();
  for (int r = 0; r < m.ranks; ++r) {
    m.flags[r] = reinterpret_cast<cuda::PeerFlags*>(arena.header(r));
  }
}

// What every call's kernels share: the arena's flags, the record, the bound.
cuda::PeerAllreduce call_of(const PeerSpace& space, DataType dtype, ReduceOp op) {
  cuda::PeerAllreduce c;
  meet_through(*space.arena, c);
  c.dtype = dtype;
  c.op = op;
  c.max_blocks = space.blocks;
  c.timeout_ns = space.timeout_ns;
  c.timeout = space.record;
  c.aborted = space.aborted;
  return c;
}

// The number of the call after `calls`: 0 means "no call" in the record.
std::uint32_t call_after(std::uint32_t calls) {
  return calls + 1 == 0 ? 1 : calls + 1;
}

std::uint32_t next_call(PeerSpace& space) {
  space.calls = call_after(space.calls);
  return space.calls;
}

}  // namespace

void check_peer_space(const PeerSpace& space, int rank) {
  // Written by this rank's kernels; read once they may have run (any time after
  // launch: the record only ever goes from zero to set, its call last).
  const volatile cuda::PeerTimeout* record = space.record;
  const std::uint32_t call = record->call;
  if (call == 0) return;
  std::atomic_thread_fence(std::memory_order_acquire);
  const auto comm_rank = [&](std::uint32_t local) { return comm_rank_of(space, local); };
  std::vector<int> missing;
  const std::uint32_t mask = record->missing_ranks;
  for (std::uint32_t r = 0; r < space.comm_ranks.size(); ++r) {
    if ((mask >> r) & 1u) missing.push_back(comm_rank(r));
  }
  const std::uint32_t gave_up = record->gave_up;  // PeerFlags::gave_up
  const bool by_abort = (gave_up & cuda::kPeerAborted) != 0;
  const std::uint32_t who = gave_up & ~cuda::kPeerAborted;  // 1 + local rank
  const int first = who == 0 ? -1 : comm_rank(who - 1);
  const std::string waited = missing.empty()
                                 ? std::string()
                                 : fmt::format(" waited on rank(s) {}", fmt::join(missing, ", "));
  if (by_abort && first == rank) {
    throw aborted_error(rank, fmt::format("while device allreduce call {}{}", call,
                                          missing.empty() ? " started" : waited));
  }
  std::string what;
  if (by_abort) {
    what = fmt::format("rank {} aborted the communicator (Communicator::abort){}", first,
                       missing.empty() ? "" : fmt::format(" while this rank{}", waited));
  } else if (!missing.empty()) {
    what = fmt::format(
        "rank(s) {} did not arrive{}", fmt::join(missing, ", "),
        first == rank || first < 0 ? "" : fmt::format(" (rank {} gave up first)", first));
  } else {
    what = fmt::format("abandoned: rank {} had given up waiting for its peers", first);
  }
  throw peer_timeout_error(rank, call, what, by_abort ? std::string() : bound_clause(space));
}

void allreduce_device_peer(PeerSpace& space, std::size_t one_shot_bytes, const void* send,
                           void* recv, std::size_t count, DataType dtype, ReduceOp op,
                           CudaStream stream) {
  const SharedArena& arena = *space.arena;
  const std::size_t esize = size_of(dtype);
  const std::size_t piece = arena.region_bytes() / esize;
  cuda::PeerAllreduce c = call_of(space, dtype, op);
  for (int r = 0; r < c.ranks; ++r) {
    c.inputs[r] = arena.region(r, 0);
    c.outputs[r] = arena.region(r, 1);
  }
  for (std::size_t offset = 0; offset < count; offset += piece) {
    c.count = std::min(piece, count - offset);
    c.source = static_cast<const std::byte*>(send) + offset * esize;
    c.result = static_cast<std::byte*>(recv) + offset * esize;
    c.call = next_call(space);
    if (c.count * esize <= one_shot_bytes) {
      cuda::one_shot_allreduce(c, stream);
    } else {
      cuda::two_shot_allreduce(c, stream);
    }
  }
}

void allreduce_device_peer_direct(PeerSpace& space, const PeerBuffers& buffers, std::size_t count,
                                  DataType dtype, ReduceOp op, CudaStream stream) {
  const std::size_t esize = size_of(dtype);
  const std::size_t piece = space.arena->region_bytes() / esize;
  cuda::PeerAllreduce c = call_of(space, dtype, op);
  for (std::size_t offset = 0; offset < count; offset += piece) {
    c.count = std::min(piece, count - offset);
    for (int r = 0; r < c.ranks; ++r) {
      c.inputs[r] =
          const_cast<std::byte*>(static_cast<const std::byte*>(buffers.sends[r])) + offset * esize;
      c.outputs[r] = static_cast<std::byte*>(buffers.recvs[r]) + offset * esize;
    }
    c.call = next_call(space);
    cuda::direct_allreduce(c, stream);
  }
}

void exchange_on_boards(const PeerSpace& space, std::uint64_t exchanges, const void* mine,
                        std::size_t bytes, void* all) {
  SharedArena& arena = *space.arena;
  const int rank = comm_rank_of(space, static_cast<std::uint32_t>(arena.rank()));
  if (bytes > kExchangeBytes) {
    throw Error(ErrorCode::Internal, rank,
                fmt::format("exchange_on_boards: {} bytes, more than {}", bytes, kExchangeBytes));
  }
  const std::size_t slot = (exchanges % 2) * kExchangeBytes;
  std::memcpy(arena.board(arena.rank()) + slot, mine, bytes);
  arena.publish(exchanges);  // what this rank wrote before, to a peer that sees the value
  // The kernels' bound, on the host's clock: nothing else ends this wait for a peer
  // that never comes (the counters' waits have no deadline of their own).
  const auto deadline =
      space.timeout_ns == UINT64_MAX
          ? std::chrono::steady_clock::time_point::max()
          : std::chrono::steady_clock::now() + std::chrono::nanoseconds(space.timeout_ns);
  std::vector<int> missing;
  for (int r = 0; r < arena.size(); ++r) {
    if (r == arena.rank()) continue;
    if (!arena.wait_before(r, exchanges, deadline)) {
      missing.push_back(comm_rank_of(space, static_cast<std::uint32_t>(r)));
    }
  }
  if (!missing.empty()) {
    // The call whose buffers were exchanged (its kernels were not launched).
    throw peer_timeout_error(
        rank, call_after(space.calls),
        fmt::format("rank(s) {} did not arrive at the exchange of its buffers' "
                    "IPC handles",
                    fmt::join(missing, ", ")),
        bound_clause(space));
  }
  for (int r = 0; r < arena.size(); ++r) {
    std::memcpy(static_cast<std::byte*>(all) + static_cast<std::size_t>(r) * bytes,
                arena.board(r) + slot, bytes);
  }
}

ProbeOutcome probe_peer_concurrency(PeerSpace& space, cuda::PeerProbeResult* result, int rounds,
                                    std::uint64_t bound_ns, CudaStream stream, Executor& fence) {
  cuda::PeerProbe probe;
  meet_through(*space.arena, probe);
  probe.timeout_ns = bound_ns;
  probe.result = result;
  probe.aborted = space.aborted;
  // One meeting first: the ranks start at different times (the first launch of a
  // kernel in a process loads it), which should not count.
  for (const int n : {1, rounds}) {
    *result = {};
    probe.rounds = n;
    cuda::peer_probe(probe, stream);
    fence.fence();
    if (result->timeout.call != 0) return {true, 0};
  }
  return {false, static_cast<double>(result->elapsed_ns) / rounds};
}

}  // namespace concord::detail

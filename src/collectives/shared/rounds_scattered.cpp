// Single-copy rounds on a scattered message: the tensors of a fusion bucket where
// they lie, reduced in place. Without it such a bucket took the copied rounds (each
// byte copied into the arena and out again) while one contiguous buffer of the same
// bytes took single copy, and a fused step cost up to 1.4x one flat allreduce of its
// bytes at 2 ranks on one node (issue #35).
//
// The protocol is allreduce_single_copy's (rounds.hpp): the ranks agree on the
// round, the owner of a piece reads the peers' parts of it into a bounce buffer and
// reduces into its own output, then every rank reads the other pieces out of their
// owners' outputs. Addresses differ: every rank's tensors lie elsewhere, so a rank
// publishes its table of spans instead of two pointers, and a peer reads the table
// once per call. The spans' counts are the same on every rank (the engine's buckets
// are), so a run of elements in one span on one rank is a run in the same span
// everywhere: each read is one process_vm_readv per run. Each span's out_scale is
// applied by the piece's owner, so the results that peers fetch are already final.
#include "collectives/shared/path_counts.hpp"
#include "collectives/shared/phases.hpp"
#include "collectives/shared/rounds.hpp"
#include "collectives/shared/rounds_protocol.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

namespace concord::detail {

using namespace shm_rounds;

void SharedRounds::learn_peer_spans(std::uint64_t round, const MessageView& buf) {
  const std::vector<TensorSpan>& mine = buf.spans();
  if (peer_spans_.size() != static_cast<std::size_t>(size_)) peer_spans_.resize(size_);
  for (int peer = 0; peer < size_; ++peer) {
    std::vector<TensorSpan>& theirs = peer_spans_[static_cast<std::size_t>(peer)];
    if (peer == rank_ || !theirs.empty()) continue;
    const BufferAddresses& board = addresses_of(arena_, peer, round);
    bool same = board.span_count == mine.size() && board.spans != nullptr;
    if (same) {
      theirs.resize(mine.size());
      arena_.read_peer(peer, theirs.data(), board.spans, mine.size() * sizeof(TensorSpan));
      for (std::size_t s = 0; same && s < mine.size(); ++s) same = theirs[s].count == mine[s].count;
    }
    if (!same) {
      // The engine plans the same buckets on every rank; a difference is a bug.
      throw Error(ErrorCode::Internal, -1,
                  fmt::format("shared-memory allreduce: the message's tensors differ between "
                              "local ranks {} ({} tensors) and {} ({} tensors, or other sizes)",
                              rank_, mine.size(), peer, board.span_count));
    }
  }
}

void SharedRounds::reduce_own_piece_scattered(const MessageView& buf, const Piece& piece) {
  const std::size_t esize = ctx_.elem_size;
  const std::size_t bytes = piece.count * esize;
  const auto ranks = static_cast<std::size_t>(size_);
  const std::vector<TensorSpan>& mine = buf.spans();
  // Every peer's part of the piece into its bounce slot, in rank order.
  std::byte* bounce = ctx_.exec->scratch(bytes * (ranks - 1));
  std::size_t slot = 0;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    std::byte* to = bounce + slot++ * bytes;
    const std::vector<TensorSpan>& theirs = peer_spans_[static_cast<std::size_t>(peer)];
    buf.for_each_span_run(piece.offset, piece.count,
                          [&](std::size_t s, std::size_t within, std::size_t at, std::size_t n) {
                            arena_.read_peer(peer, to + at * esize, theirs[s].data + within * esize,
                                             n * esize);
                          });
    count_peer_access(PeerAccess::InputCopied);
  }
  // Own input first, then the peers' in rank order (as allreduce_single_copy), into
  // the own tensors, each run scaled while it is still in cache.
  SourceList sources(ranks);
  buf.for_each_span_run(piece.offset, piece.count,
                        [&](std::size_t s, std::size_t within, std::size_t at, std::size_t n) {
                          std::byte* out = mine[s].data + within * esize;
                          sources[0] = out;
                          for (std::size_t k = 1; k < ranks; ++k) {
                            sources[k] = bounce + (k - 1) * bytes + at * esize;
                          }
                          ctx_.exec->reduce_many(out, sources.data(), ranks, n);
                          if (mine[s].out_scale != 1.0) ctx_.exec->scale(out, n, mine[s].out_scale);
                        });
}

void SharedRounds::allreduce_single_copy_scattered(const MessageView& buf,
                                                   const std::vector<Piece>& pieces) {
  ShmPhaseClock clock;
  const std::uint64_t round =
      post_addresses({nullptr, nullptr, buf.spans().data(), buf.spans().size()}, clock);
  learn_peer_spans(round, buf);
  const auto me = static_cast<std::size_t>(rank_);
  if (me < pieces.size() && pieces[me].count != 0) reduce_own_piece_scattered(buf, pieces[me]);
  clock.lap(ShmPhase::Reduce);
  publish(counter(round, Step::PieceReduced));
  wait_all(counter(round, Step::PieceReduced));
  clock.lap(ShmPhase::WaitReduced);
  const std::size_t esize = ctx_.elem_size;
  const std::vector<TensorSpan>& mine = buf.spans();
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (j == me || pieces[j].count == 0) continue;
    const auto owner = static_cast<int>(j);
    const std::vector<TensorSpan>& theirs = peer_spans_[j];
    buf.for_each_span_run(pieces[j].offset, pieces[j].count,
                          [&](std::size_t s, std::size_t within, std::size_t, std::size_t n) {
                            arena_.read_peer(owner, mine[s].data + within * esize,
                                             theirs[s].data + within * esize, n * esize);
                          });
    count_peer_access(PeerAccess::ResultFetchedCopied);
  }
  publish(counter(round, Step::Done));
  clock.lap(ShmPhase::CopyOut);
  clock.end_round();
}

}  // namespace concord::detail

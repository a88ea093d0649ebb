#include "collectives/shared/rounds.hpp"

#include "collectives/shared/path_counts.hpp"
#include "collectives/shared/phases.hpp"
#include "collectives/shared/rounds_protocol.hpp"

#include <algorithm>
#include <array>

namespace concord::detail {

using namespace shm_rounds;

void SharedRounds::publish(std::uint64_t value) {
  ctx_.exec->fence();  // device work done before peers are told
  arena_.publish(value);
}

std::uint64_t SharedRounds::begin_round() {
  const std::uint64_t round = arena_.published() / kStepsPerRound;
  // This round's buffers were round-2's: every peer must be done reading those.
  if (round >= 2) wait_all(counter(round - 2, Step::Done));
  return round;
}

void SharedRounds::wait_all(std::uint64_t value) const {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) arena_.wait_for(peer, value);
  }
}

std::size_t SharedRounds::region_offset(const std::vector<Piece>& pieces, std::size_t piece) const {
  std::size_t elements = 0;
  for (std::size_t j = 0; j < piece; ++j) elements += pieces[j].count;
  return elements * ctx_.elem_size;
}

void SharedRounds::contribute(std::uint64_t round, const MessageView& src,
                              const std::vector<Piece>& pieces) {
  std::byte* mine = arena_.region(rank_, input_region(round));
  const std::size_t esize = ctx_.elem_size;
  std::size_t at = 0;
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (static_cast<int>(j) != rank_) {
      src.for_each_run(pieces[j].offset, pieces[j].count,
                       [&](const std::byte* p, std::size_t off, std::size_t n, double) {
                         ctx_.exec->copy(mine + at + off * esize, p, n * esize);
                       });
    }
    at += pieces[j].count * esize;
  }
}

void SharedRounds::reduce_own_piece(std::uint64_t round, const MessageView& src, std::byte* out,
                                    const std::vector<Piece>& pieces) {
  const int me = rank_;
  const Piece& piece = pieces[static_cast<std::size_t>(me)];
  if (piece.count == 0) return;
  const std::size_t esize = ctx_.elem_size;
  const std::size_t at = region_offset(pieces, static_cast<std::size_t>(me));
  // Own input first (read where it lies: it was never copied), then the peers'
  // in rank order. Only this rank reduces this piece, so every rank ends up
  // with these bits; out may be the own input itself (in place).
  int first_peer = me == 0 ? 1 : 0;
  if (size_ == 1) {
    src.for_each_run(piece.offset, piece.count,
                     [&](const std::byte* p, std::size_t off, std::size_t n, double) {
                       ctx_.exec->copy(out + off * esize, p, n * esize);
                     });
    return;
  }
  // Sources in rank order after the own input: [own, peers...]; one call per run.
  SourceList sources(static_cast<std::size_t>(size_));
  src.for_each_run(piece.offset, piece.count,
                   [&](const std::byte* p, std::size_t off, std::size_t n, double) {
                     std::size_t k = 0;
                     sources[k++] = p;
                     for (int peer = first_peer; peer < size_; ++peer) {
                       if (peer != me) {
                         sources[k++] = arena_.region(peer, input_region(round)) + at + off * esize;
                       }
                     }
                     ctx_.exec->reduce_many(out + off * esize, sources.data(), k, n);
                   });
}

void SharedRounds::copy_result(std::byte* to, const std::byte* from, std::size_t bytes) const {
  if (stream_output_) {
    ctx_.exec->copy_streaming(to, from, bytes);
  } else {
    ctx_.exec->copy(to, from, bytes);
  }
}

void SharedRounds::copy_out(const std::byte* from, const Piece& piece,
                            const MessageView& dst) const {
  const std::size_t esize = ctx_.elem_size;
  dst.for_each_run(piece.offset, piece.count,
                   [&](std::byte* p, std::size_t off, std::size_t n, double factor) {
                     // (A scaled result is read again at once: keep it cached.)
                     if (factor == 1.0) {
                       copy_result(p, from + off * esize, n * esize);
                     } else {
                       ctx_.exec->copy(p, from + off * esize, n * esize);
                     }
                     // Still in cache: scaling here costs little.
                     if (factor != 1.0) ctx_.exec->scale(p, n, factor);
                   });
}

void SharedRounds::direct(const MessageView& src, const MessageView& dst) {
  const std::uint64_t round = begin_round();
  const int in = input_region(round);
  const std::size_t count = src.count();
  const std::size_t esize = ctx_.elem_size;
  std::byte* mine = arena_.region(rank_, in);
  src.for_each_run(0, count, [&](const std::byte* p, std::size_t off, std::size_t n, double) {
    ctx_.exec->copy(mine + off * esize, p, n * esize);
  });
  publish(counter(round, Step::InputsReady));
  wait_all(counter(round, Step::InputsReady));
  // Everyone reduces in the same order from the same copies: identical bits.
  SourceList sources(static_cast<std::size_t>(size_));
  dst.for_each_run(0, count, [&](std::byte* p, std::size_t off, std::size_t n, double factor) {
    for (int peer = 0; peer < size_; ++peer) {
      sources[static_cast<std::size_t>(peer)] = arena_.region(peer, in) + off * esize;
    }
    ctx_.exec->reduce_many(p, sources.data(), static_cast<std::size_t>(size_), n);
    if (factor != 1.0) ctx_.exec->scale(p, n, factor);
  });
  publish(counter(round, Step::Done));
}

void SharedRounds::reduce_scatter(const void* src, void* dst, const std::vector<Piece>& pieces) {
  const std::uint64_t round = begin_round();
  // Pieces address the whole message; the view only needs to reach past the last.
  std::size_t end = 0;
  for (const Piece& p : pieces) end = std::max(end, p.offset + p.count);
  const MessageView view(src, end, ctx_.elem_size);
  contribute(round, view, pieces);
  publish(counter(round, Step::InputsReady));
  wait_all(counter(round, Step::InputsReady));
  const auto me = static_cast<std::size_t>(rank_);
  if (me < pieces.size()) {
    auto* out = static_cast<std::byte*>(dst) + pieces[me].offset * ctx_.elem_size;
    reduce_own_piece(round, view, out, pieces);
  }
  publish(counter(round, Step::Done));
}

void SharedRounds::allgather(void* dst, const std::vector<Piece>& pieces) {
  const std::uint64_t round = begin_round();
  auto* d = static_cast<std::byte*>(dst);
  const int me = rank_;
  const auto mine = static_cast<std::size_t>(me);
  if (mine < pieces.size() && pieces[mine].count != 0) {
    ctx_.exec->copy(arena_.region(me, result_region(round)),
                    d + pieces[mine].offset * ctx_.elem_size, pieces[mine].count * ctx_.elem_size);
  }
  publish(counter(round, Step::PieceReduced));
  wait_all(counter(round, Step::PieceReduced));
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (j == mine || pieces[j].count == 0) continue;
    ctx_.exec->copy(d + pieces[j].offset * ctx_.elem_size,
                    arena_.region(static_cast<int>(j), result_region(round)),
                    pieces[j].count * ctx_.elem_size);
  }
  publish(counter(round, Step::Done));
}

void SharedRounds::allreduce(const MessageView& src, const MessageView& dst,
                             const std::vector<Piece>& pieces) {
  ShmPhaseClock clock;
  const std::uint64_t round = begin_round();
  clock.lap(ShmPhase::WaitSlot);
  contribute(round, src, pieces);
  clock.lap(ShmPhase::CopyIn);
  publish(counter(round, Step::InputsReady));
  wait_all(counter(round, Step::InputsReady));
  clock.lap(ShmPhase::WaitInputs);
  const auto mine = static_cast<std::size_t>(rank_);
  if (mine < pieces.size()) {
    // Reduce into the result region (hot in this core's cache, read by peers
    // next), publish, and only then copy it out.
    reduce_own_piece(round, src, arena_.region(rank_, result_region(round)), pieces);
  }
  clock.lap(ShmPhase::Reduce);
  publish(counter(round, Step::PieceReduced));
  // The own piece needs no peer: copying it out first fills the wait for theirs.
  if (mine < pieces.size() && pieces[mine].count != 0) {
    copy_out(arena_.region(rank_, result_region(round)), pieces[mine], dst);
    clock.lap(ShmPhase::CopyOut);
  }
  wait_all(counter(round, Step::PieceReduced));
  clock.lap(ShmPhase::WaitReduced);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (pieces[j].count == 0 || j == mine) continue;
    copy_out(arena_.region(static_cast<int>(j), result_region(round)), pieces[j], dst);
  }
  publish(counter(round, Step::Done));
  clock.lap(ShmPhase::CopyOut);
  clock.end_round();
}

void SharedRounds::reduce_own_piece_single_copy(std::uint64_t round, const std::byte* src,
                                                std::byte* dst, const Piece& piece) {
  const int me = rank_;
  const std::size_t bytes = piece.count * ctx_.elem_size;
  const std::size_t at = piece.offset * ctx_.elem_size;
  const auto ranks = static_cast<std::size_t>(size_);
  // A peer's input in its shared heap is read where it lies; any other is read
  // into a bounce slot, (p-1)/p of a round in all (shm_single_copy_round_bytes),
  // which should stay in cache between the read and the reduction.
  std::byte* bounce = nullptr;
  SourceList sources(ranks);
  std::size_t k = 0;
  sources[k++] = src + at;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == me) continue;
    const std::byte* theirs = addresses_of(arena_, peer, round).src + at;
    if (const std::byte* view = arena_.peer_view(peer, theirs, bytes)) {
      count_peer_access(PeerAccess::InputInPlace);
      sources[k++] = view;
      continue;
    }
    if (bounce == nullptr) bounce = ctx_.exec->scratch(bytes * (ranks - 1));
    std::byte* slot = bounce + (k - 1) * bytes;
    arena_.read_peer(peer, slot, theirs, bytes);
    count_peer_access(PeerAccess::InputCopied);
    sources[k++] = slot;
  }
  // A peer whose output lies in its heap gets the result written there as well,
  // and fetches nothing (allreduce_single_copy skips the piece).
  std::vector<std::byte*>& pushes = push_targets_;
  pushes.clear();
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == me) continue;
    if (std::byte* out =
            arena_.peer_view(peer, addresses_of(arena_, peer, round).dst + at, bytes)) {
      pushes.push_back(out);
      count_peer_access(PeerAccess::ResultWritten);
    }
  }
  if (pushes.empty()) {
    ctx_.exec->reduce_many(dst + at, sources.data(), k, piece.count);
    return;
  }
  // In chunks that stay in L1 between the reduction and the copies: the result
  // is read from memory by no one, and every output is written once.
  // (The sources move on in place: a second SourceList above 16 ranks would
  // share the first one's per-thread storage.)
  const std::size_t chunk = kPushChunkBytes / ctx_.elem_size;
  for (std::size_t done = 0; done < piece.count; done += chunk) {
    const std::size_t n = std::min(chunk, piece.count - done);
    const std::size_t off = done * ctx_.elem_size;
    ctx_.exec->reduce_many(dst + at + off, sources.data(), k, n);
    // Streamed from shm_stream_bytes: the peer reads its output only after the call.
    for (std::byte* out : pushes) copy_result(out + off, dst + at + off, n * ctx_.elem_size);
    for (std::size_t i = 0; i < k; ++i) {
      sources[i] = static_cast<const std::byte*>(sources[i]) + n * ctx_.elem_size;
    }
  }
}

std::uint64_t SharedRounds::post_addresses(const BufferAddresses& where, ShmPhaseClock& clock) {
  const std::uint64_t round = begin_round();
  clock.lap(ShmPhase::WaitSlot);
  *reinterpret_cast<BufferAddresses*>(arena_.region(rank_, input_region(round))) = where;
  publish(counter(round, Step::InputsReady));
  wait_all(counter(round, Step::InputsReady));
  clock.lap(ShmPhase::WaitInputs);
  return round;
}

void SharedRounds::allreduce_single_copy(const std::byte* src, std::byte* dst,
                                         const std::vector<Piece>& pieces) {
  ShmPhaseClock clock;
  const std::uint64_t round = post_addresses({src, dst, nullptr, 0}, clock);
  const auto me = static_cast<std::size_t>(rank_);
  if (me < pieces.size() && pieces[me].count != 0) {
    reduce_own_piece_single_copy(round, src, dst, pieces[me]);
  }
  clock.lap(ShmPhase::Reduce);
  publish(counter(round, Step::PieceReduced));
  wait_all(counter(round, Step::PieceReduced));
  clock.lap(ShmPhase::WaitReduced);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (j == me || pieces[j].count == 0) continue;
    const auto owner = static_cast<int>(j);
    const std::size_t at = pieces[j].offset * ctx_.elem_size;
    const std::size_t bytes = pieces[j].count * ctx_.elem_size;
    // In my heap: the owner wrote it there (reduce_own_piece_single_copy), and
    // its PieceReduced, which wait_all saw, came after.
    if (arena_.peer_view(rank_, dst + at, bytes) != nullptr) continue;
    const std::byte* theirs = addresses_of(arena_, owner, round).dst + at;
    if (const std::byte* view = arena_.peer_view(owner, theirs, bytes)) {
      copy_result(dst + at, view, bytes);
      count_peer_access(PeerAccess::ResultFetchedInPlace);
    } else {
      arena_.read_peer(owner, dst + at, theirs, bytes);
      count_peer_access(PeerAccess::ResultFetchedCopied);
    }
  }
  publish(counter(round, Step::Done));
  clock.lap(ShmPhase::CopyOut);
  clock.end_round();
}

void SharedRounds::finish_single_copy() {
  const std::uint64_t done = arena_.published();
  if (done >= kStepsPerRound) wait_all(done);
}

}  // namespace concord::detail

// The building blocks of the shared-memory allreduce: rounds over a SharedArena.
//
// Every rank keeps one progress counter. Round r (counted per arena, across calls)
// uses input region r%2 and result region 2 + r%2, and moves the counter through
//   3r+1  my inputs for round r are in my input region
//   3r+2  my reduced piece for round r is in my result region
//   3r+3  I have finished reading everyone's regions of round r
// A rank may write its regions for round r once every peer has reached 3(r-2)+3:
// nobody reads round r-2's buffers any more. Two buffers let a rank fill round
// r+1 while slower peers still read round r; no MPI call is made on this path.
// Single-copy rounds also reach into the user's buffers: a peer reads my src
// and dst of round r only between my 3r+1 and its own 3r+3, and writes my dst
// (shared heap only) only between my 3r+1 and its own 3r+2.
#pragma once

#include "collectives/algorithms.hpp"
#include "collectives/shared/message_view.hpp"
#include "transport/shared_arena.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace concord::detail {

class ShmPhaseClock;
namespace shm_rounds {
struct BufferAddresses;
}

// The range of the message one rank of the arena reduces in a round, in elements.
struct Piece {
  std::size_t offset = 0;
  std::size_t count = 0;
};

class SharedRounds {
 public:
  SharedRounds(SharedArena& arena, const ReduceContext& ctx)
      : arena_(arena), ctx_(ctx), rank_(arena.rank()), size_(arena.size()) {}

  // Elements of this dtype that fit in one region.
  std::size_t region_elements() const { return arena_.region_bytes() / ctx_.elem_size; }
  // allreduce() copies results out with Executor::copy_streaming (outputs
  // larger than the last-level cache).
  void stream_output(bool on) { stream_output_ = on; }

  // Small messages, count <= region_elements(): every rank reduces the whole
  // vector from every rank's input, in rank order (so every rank gets the same
  // bits). One synchronisation.
  void direct(const MessageView& src, const MessageView& dst);

  // pieces[j] is reduced by the rank j of the arena (ranks >= pieces.size() own
  // none and only contribute). The sum of the piece counts must fit in a region.
  //
  // reduce_scatter: the owner's piece of dst holds the reduction over the arena.
  // (dst's out_scale factors are not applied here: the caller scales.)
  void reduce_scatter(const void* src, void* dst, const std::vector<Piece>& pieces);
  // allgather: every rank's dst gets each owner's piece of dst.
  void allgather(void* dst, const std::vector<Piece>& pieces);
  // Both in one round: every rank's dst gets every piece reduced (and scaled by
  // dst's out_scale factors). src and dst may be the same view.
  void allreduce(const MessageView& src, const MessageView& dst, const std::vector<Piece>& pieces);

  // The same round with single-copy reads (arena.can_read_peer()), on whole
  // contiguous, unscaled buffers: every rank publishes the addresses of its
  // src and dst; the owner of a piece reads the peers' parts of it straight out
  // of their src into a bounce buffer and reduces into its own dst; then every
  // rank reads the other pieces straight out of their owners' dst. Nothing is
  // copied into the arena. Buffers in a peer's shared heap (arena.peer_view)
  // are used in place instead: the owner reads a peer's src there, and writes
  // the reduced piece into a peer's dst there, which then fetches nothing.
  // Peers use the caller's buffers until their Done: call finish_single_copy()
  // before returning to the user.
  void allreduce_single_copy(const std::byte* src, std::byte* dst,
                             const std::vector<Piece>& pieces);
  // The same on a scattered message reduced in place (the tensors of a fusion
  // bucket where they lie; identical span counts on every rank): each rank
  // publishes its table of spans, which a peer reads once per call; the owner of
  // a piece reads the peers' parts of it run by run into the bounce buffer, and
  // reduces and scales into its own tensors; then every rank reads the other
  // pieces run by run out of their owners' tensors (rounds_scattered.cpp).
  // Call finish_single_copy() before returning to the user.
  void allreduce_single_copy_scattered(const MessageView& buf, const std::vector<Piece>& pieces);
  // Waits until every peer has finished the last round (read all it needed
  // from this rank's buffers).
  void finish_single_copy();

 private:
  std::uint64_t begin_round();
  void publish(std::uint64_t value);  // fences the executor first
  void wait_all(std::uint64_t value) const;
  // Copies every piece but the caller's own from src into its input region.
  void contribute(std::uint64_t round, const MessageView& src, const std::vector<Piece>& pieces);
  // Reduces the caller's piece from src (its own input) and every peer's input
  // region into out (contiguous, may be src's own memory).
  void reduce_own_piece(std::uint64_t round, const MessageView& src, std::byte* out,
                        const std::vector<Piece>& pieces);
  // An unscaled result into the output: streamed where stream_output() says.
  void copy_result(std::byte* to, const std::byte* from, std::size_t bytes) const;
  // Copies [piece.offset, +count) from `from` into dst, scaling as dst says.
  void copy_out(const std::byte* from, const Piece& piece, const MessageView& dst) const;
  std::size_t region_offset(const std::vector<Piece>& pieces, std::size_t piece) const;
  // Reduces the caller's piece from its own src and the peers' (read into a
  // bounce buffer) into its dst, in the rank order reduce_own_piece uses.
  void reduce_own_piece_single_copy(std::uint64_t round, const std::byte* src, std::byte* dst,
                                    const Piece& piece);
  // A single-copy round's start: waits for the round's buffers, puts where this
  // rank's message lies on its board, and waits until every peer's is there.
  std::uint64_t post_addresses(const shm_rounds::BufferAddresses& where, ShmPhaseClock& clock);
  // Reads every peer's table of spans (once per call) and checks it has ours.
  void learn_peer_spans(std::uint64_t round, const MessageView& buf);
  // The scattered form of reduce_own_piece_single_copy.
  void reduce_own_piece_scattered(const MessageView& buf, const Piece& piece);

  // Single copy: a reduced piece goes to the peers' outputs in their heaps in
  // chunks of this size, copied while still in L1.
  static constexpr std::size_t kPushChunkBytes = 16 << 10;

  SharedArena& arena_;
  ReduceContext ctx_;
  // The arena's rank and size, asked once (virtual calls) instead of in every loop.
  const int rank_;
  const int size_;
  bool stream_output_ = false;
  std::vector<std::byte*> push_targets_;  // reduce_own_piece_single_copy's, kept between rounds
  // allreduce_single_copy_scattered: each peer's spans, read in the call's first round.
  std::vector<std::vector<TensorSpan>> peer_spans_;
};

}  // namespace concord::detail

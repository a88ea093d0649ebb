#include "collectives/shared_rounds.hpp"

#include <cstring>

namespace concord::detail {
namespace {

int input_region(std::uint64_t round) {
  return static_cast<int>(round % 2);
}
int result_region(std::uint64_t round) {
  return 2 + static_cast<int>(round % 2);
}

}  // namespace

std::uint64_t SharedRounds::begin_round() {
  const std::uint64_t round = arena_.published() / 3;
  if (round >= 2) wait_all(3 * round - 3);
  return round;
}

void SharedRounds::wait_all(std::uint64_t value) const {
  for (int peer = 0; peer < arena_.size(); ++peer) {
    if (peer != arena_.rank()) arena_.wait_for(peer, value);
  }
}

std::size_t SharedRounds::region_offset(const std::vector<Piece>& pieces, std::size_t piece) const {
  std::size_t elements = 0;
  for (std::size_t j = 0; j < piece; ++j) elements += pieces[j].count;
  return elements * spec_.elem_size;
}

void SharedRounds::contribute(std::uint64_t round, const std::byte* src,
                              const std::vector<Piece>& pieces) {
  std::byte* mine = arena_.region(arena_.rank(), input_region(round));
  std::size_t at = 0;
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    const std::size_t bytes = pieces[j].count * spec_.elem_size;
    if (static_cast<int>(j) != arena_.rank() && bytes != 0) {
      std::memcpy(mine + at, src + pieces[j].offset * spec_.elem_size, bytes);
    }
    at += bytes;
  }
}

void SharedRounds::reduce_own_piece(std::uint64_t round, const std::byte* src, std::byte* out,
                                    const std::vector<Piece>& pieces) {
  const int me = arena_.rank();
  const Piece& piece = pieces[static_cast<std::size_t>(me)];
  if (piece.count == 0) return;
  const std::size_t at = region_offset(pieces, static_cast<std::size_t>(me));
  // Own input first (read from src: it was never copied), then the peers' in
  // rank order. Only this rank reduces this piece, so every rank ends up with
  // these bits; out may be src itself (in place).
  const std::byte* own = src + piece.offset * spec_.elem_size;
  if (arena_.size() == 1) {
    if (out != own) std::memcpy(out, own, piece.count * spec_.elem_size);
    return;
  }
  bool first = true;
  for (int peer = 0; peer < arena_.size(); ++peer) {
    if (peer == me) continue;
    const std::byte* theirs = arena_.region(peer, input_region(round)) + at;
    spec_.fn(out, first ? own : out, theirs, piece.count);
    first = false;
  }
}

void SharedRounds::direct(const void* src, void* dst, std::size_t count) {
  const std::uint64_t round = begin_round();
  const int in = input_region(round);
  const std::size_t bytes = count * spec_.elem_size;
  std::memcpy(arena_.region(arena_.rank(), in), src, bytes);
  arena_.publish(3 * round + 1);
  wait_all(3 * round + 1);
  // Everyone reduces in the same order from the same copies: identical bits.
  spec_.fn(dst, arena_.region(0, in), arena_.region(1, in), count);
  for (int peer = 2; peer < arena_.size(); ++peer) {
    spec_.fn(dst, dst, arena_.region(peer, in), count);
  }
  arena_.publish(3 * round + 3);
}

void SharedRounds::reduce_scatter(const void* src, void* dst, const std::vector<Piece>& pieces) {
  const std::uint64_t round = begin_round();
  const auto* s = static_cast<const std::byte*>(src);
  contribute(round, s, pieces);
  arena_.publish(3 * round + 1);
  wait_all(3 * round + 1);
  const auto me = static_cast<std::size_t>(arena_.rank());
  if (me < pieces.size()) {
    auto* out = static_cast<std::byte*>(dst) + pieces[me].offset * spec_.elem_size;
    reduce_own_piece(round, s, out, pieces);
  }
  arena_.publish(3 * round + 3);
}

void SharedRounds::allgather(void* dst, const std::vector<Piece>& pieces) {
  const std::uint64_t round = begin_round();
  auto* d = static_cast<std::byte*>(dst);
  const int me = arena_.rank();
  const auto mine = static_cast<std::size_t>(me);
  if (mine < pieces.size() && pieces[mine].count != 0) {
    std::memcpy(arena_.region(me, result_region(round)), d + pieces[mine].offset * spec_.elem_size,
                pieces[mine].count * spec_.elem_size);
  }
  arena_.publish(3 * round + 2);
  wait_all(3 * round + 2);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (j == mine || pieces[j].count == 0) continue;
    std::memcpy(d + pieces[j].offset * spec_.elem_size,
                arena_.region(static_cast<int>(j), result_region(round)),
                pieces[j].count * spec_.elem_size);
  }
  arena_.publish(3 * round + 3);
}

void SharedRounds::allreduce(const void* src, void* dst, const std::vector<Piece>& pieces) {
  const std::uint64_t round = begin_round();
  const auto* s = static_cast<const std::byte*>(src);
  auto* d = static_cast<std::byte*>(dst);
  contribute(round, s, pieces);
  arena_.publish(3 * round + 1);
  wait_all(3 * round + 1);
  const auto mine = static_cast<std::size_t>(arena_.rank());
  if (mine < pieces.size()) {
    // Reduce into the result region (hot in this core's cache, read by peers
    // next), publish, and only then copy it out.
    reduce_own_piece(round, s, arena_.region(arena_.rank(), result_region(round)), pieces);
  }
  arena_.publish(3 * round + 2);
  wait_all(3 * round + 2);
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    if (pieces[j].count == 0) continue;
    std::memcpy(d + pieces[j].offset * spec_.elem_size,
                arena_.region(static_cast<int>(j), result_region(round)),
                pieces[j].count * spec_.elem_size);
  }
  arena_.publish(3 * round + 3);
}

}  // namespace concord::detail

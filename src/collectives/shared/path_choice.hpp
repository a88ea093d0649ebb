// Which of the two large-message paths of the shared-memory allreduce a message
// takes, by measuring both on this node.
//
// Rounds copied through the arena (copy in, reduce, copy out) and single-copy
// rounds (process_vm_readv straight out of the peers' buffers) trade memory
// traffic for kernel work: single copy moves about a fifth less data through
// the caches but pins the peers' pages on every read. Which wins depends on the
// machine more than on the size; on the development VM the ranking flipped
// from one hour to the next (RESULTS.md at commit 5aa2ccf, "Measured path choice"). So from
// shm_single_copy_bytes on, each power-of-two size class is timed:
//   - its first kSamplesPerPath messages take single copy, the next as many
//     the copied rounds (runs of each, not alternating: alternating left the
//     copy path's regions cold in every sample and picked single copy at
//     256-512 KiB where copied rounds were 1.2-1.4x faster when repeated), and
//     each rank keeps its fastest time of each path, per byte (as the time of a
//     message of the class's smallest size), on its board in the arena;
//   - the next message takes single copy untimed: by its end every rank has
//     waited on a counter every peer published after its last time, so every
//     board is visible to every rank;
//   - from then on each rank reads every board and takes the path whose best
//     times, summed over the ranks, are lower: the same numbers on every rank,
//     so the same path, with no synchronisation of its own;
//   - every kMeasurePeriod messages of the class this starts again, as a
//     machine's state (its memory bandwidth, other tenants) changes while a job
//     runs. No rank gets more than two rounds ahead of another, so a peer has
//     read this rank's times long before they are reset.
// A single-copy message's time includes its last wait for every peer to finish
// reading its buffers; a copied one's tail falls into the next message. That
// leans the choice slightly towards the copied rounds.
// Every rank of the node must measure or none (node_arena.cpp agrees on it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace concord::detail {

class SharedArena;

inline constexpr int kSamplesPerPath = 4;
inline constexpr int kMeasurePeriod = 1024;
// Size classes by the highest set bit of a message's bytes; 2^47 and up share the last.
inline constexpr std::size_t kPathSizeClasses = 48;

struct PathPlan {
  bool single_copy = true;
  int timed_class = -1;  // the size class this message's time is booked to; -1: untimed
  // The message's size. A class spans a factor of two, so its samples are booked
  // as the time of a message of the class's smallest size (scaled by bytes):
  // otherwise a path whose samples happened to be the class's smaller messages
  // (a fusion bucket's tail, or another caller's messages between) would win.
  std::size_t bytes = 0;
};

// What a rank keeps on its board in the arena (zero when the arena is made).
// Written only by its owner; peers read best_us once a measurement is over.
struct PathBoard {
  std::array<std::uint64_t, kPathSizeClasses> messages;        // eligible messages per class
  std::array<std::array<float, 2>, kPathSizeClasses> best_us;  // [class][single copy, copy]
  std::array<std::uint8_t, kPathSizeClasses> chosen;           // 0: not yet, 1 single, 2 copy
};

// The path of an eligible message (single copy possible, at least
// shm_single_copy_bytes). `measure` false: always single copy.
PathPlan plan_large_path(SharedArena& arena, std::size_t bytes, bool measure);
// Books a timed message's seconds on this rank's board.
void record_large_path(SharedArena& arena, const PathPlan& plan, double seconds);

// The same on boards given directly (`boards`: every rank's, `mine` among
// them), for tests that step ranks with times of their own.
PathPlan plan_path(PathBoard& mine, std::span<const PathBoard* const> boards, std::size_t bytes);
void record_path(PathBoard& mine, const PathPlan& plan, double seconds);

// The choice from every rank's best times of one size class (same order, one
// entry per rank): single copy unless the copy path's sum is lower.
bool single_copy_wins(std::span<const float> single_copy_us, std::span<const float> copy_us);

}  // namespace concord::detail

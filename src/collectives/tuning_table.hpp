// Auto selection: one table of crossovers, by rank count and message size.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace concord::detail {

// JSON (docs/ALGORITHMS.md, src/collectives/tuning_default.json):
//   {"rules": [{"max_ranks": 2, "algorithms": [{"max_bytes": 4096, "algorithm":
//   "recursive_doubling"}, {"max_bytes": null, "algorithm": "ring"}]}, ...]}
// The first rule whose max_ranks (null: no limit) covers the rank count applies;
// within it, the first entry whose max_bytes covers the message size.
// An optional "thresholds" object sets the size limits of SizeThresholds by name
// ({"shm_direct_bytes": 1024, ...}); names it leaves out keep the built-in value.
//
// Size limits within a path, beside the choice of algorithm.
struct SizeThresholds {
  // Host messages up to this size take the one-synchronisation shared-memory
  // path (every rank reduces everything) where the node has three or more ranks.
  std::size_t shm_direct_bytes = 1024;
  // The same limit where the node has exactly two ranks. There the direct path
  // reads no more of the peer's memory than the rounds do (n bytes either way;
  // at p ranks (p-1)n against 2n(p-1)/p) and saves one synchronisation: at
  // 2-8 KiB the median MPICH / concord ratio rose by 15-40 % (noise between such
  // runs: up to 15 %), at 16 KiB it did not rise (RESULTS.md at commit 5aa2ccf, "The direct
  // path at 2 ranks").
  std::size_t shm_pair_direct_bytes = 8 << 10;
  // The direct limit for a node of `node_ranks` ranks.
  std::size_t shm_direct_bytes_for(int node_ranks) const {
    return node_ranks == 2 ? shm_pair_direct_bytes : shm_direct_bytes;
  }
  // Host messages of at least this size copy their results out of shared
  // memory with non-temporal stores (Executor::copy_streaming): the output is
  // larger than the last-level cache and would only evict the next round.
  std::size_t shm_stream_bytes = 8 << 20;
  // Host messages of at least this size take single-copy rounds where the
  // node's ranks may read each other's memory (cross-memory attach).
  std::size_t shm_single_copy_bytes = 256 << 10;
  // The data one single-copy round moves: its bounce buffer is (p-1)/p of it,
  // which should stay in a core's L2 (at p = 2, 1 MiB rounds reached a median
  // 74 % of the roofline at 4 MiB where 4 MiB rounds reached 57 %:
  // RESULTS.md at commit 5aa2ccf, "Single-copy round size"; more ranks not measured).
  std::size_t shm_single_copy_round_bytes = 1 << 20;
  // Hierarchical host messages of at least this size cross the network from
  // every rank of a node at once, each with its shard; smaller ones from one
  // leader per node with the whole message. Spreading wins where one rank
  // cannot fill the link or reducing the whole message would tie up one core
  // (the default); a link that one flow already fills only gains competing
  // flows: at 1 Gbit/s over TCP one leader was faster (RESULTS.md at commit 5aa2ccf,
  // "Hierarchical: one leader or every rank across the link"), and the
  // cluster model's tuning file says so for such links.
  std::size_t hierarchical_spread_bytes = 0;
  // Hierarchical host messages cross the network in pieces of this many bytes
  // of every shard, each on the communicator's network thread while the
  // calling thread does the node's rounds of the pieces around it; 0: one step.
  // At 2 ranks per node, small enough that a message of a few MiB has several
  // to overlap, large enough that each piece's network step costs little more
  // than its bytes (measured at 2 hosts x 2 ranks, 1 Gbit/s: RESULTS.md at commit 5aa2ccf,
  // "Hierarchical: the node's phases behind the network"). With more ranks per
  // node a piece of the message is larger; the cluster model's tuning file
  // chooses the size for a cluster's links and ranks per node (docs/SCALING.md).
  // At most kMaxHierarchicalPieceBytes (core/config.hpp).
  std::size_t hierarchical_piece_bytes = std::size_t{1} << 20;
  // The same for device messages over the IPC rounds.
  std::size_t cuda_direct_bytes = 256 * 1024;
  // The device-synchronised path (collectives/device_peer.hpp), where the node's
  // ranks' kernels run at the same time: messages up to cuda_peer_max_bytes take it
  // (larger ones the IPC rounds), one shot up to cuda_peer_one_shot_bytes and two shot
  // above, each kernel with at most cuda_peer_blocks blocks (1 to kMaxPeerBlocks).
  // Not yet measured on a GPU: every size takes the path (it never synchronises the
  // stream), the one-shot limit is the IPC rounds' direct limit, and the blocks are
  // half an H100's multiprocessors (scripts/device-check sweeps all three).
  std::size_t cuda_peer_max_bytes = SIZE_MAX;
  std::size_t cuda_peer_one_shot_bytes = 256 * 1024;
  std::size_t cuda_peer_blocks = 64;
  // From this size on, the path works straight on the callers' buffers, mapped into
  // the peers (cuda::direct_allreduce: no copy into its regions, 2n bytes a rank),
  // where they can be; it costs two meetings on the host a call (their IPC handles),
  // which large messages hide. Not yet measured on a GPU either.
  std::size_t cuda_peer_direct_bytes = 16 << 20;
  // Where ranks share a GPU whose kernels do not run at once (no MPS), device
  // messages up to this size go through pinned host memory, larger ones the IPC
  // rounds: the faster of the two on the H100 (docs/GPU.md, "Ranks sharing a GPU").
  std::size_t cuda_unshared_staging_bytes = 2 << 20;
  // Device shards up to this size cross nodes over NCCL by recursive doubling,
  // larger ones by reduce-scatter + allgather.
  std::size_t nccl_recursive_doubling_bytes = 64 * 1024;
  // The engine's largest fusion bucket where neither EngineOptions nor
  // CONCORD_FUSION_THRESHOLD set one. Within one node a bucket is reduced in
  // place through shared memory, so a large one costs nothing and saves calls:
  // 64 MiB. Across nodes each bucket is packed, sent and unpacked: smaller
  // buckets let packing, the network and unpacking overlap, and messages of a few
  // MiB stream faster over TCP than larger ones (RESULTS.md at commit 5aa2ccf,
  // "Fusion across 2 hosts"): 4 MiB.
  std::size_t fusion_bytes_one_node = std::size_t{64} << 20;
  std::size_t fusion_bytes_across_nodes = std::size_t{4} << 20;
  // Where buckets are packed (across nodes, flat algorithms), each byte of a
  // fused tensor is copied into the buffer and out again. Alone, a tensor costs
  // one more collective's fixed latency instead: a few us on InfiniBand, tens of
  // us over TCP, against 50-100 us for copying 256 KiB twice (ResNet-50 across 2
  // hosts, unlimited link: the fused step 1.01-1.10x one flat allreduce of the
  // same bytes with every tensor packed, 0.88-1.04x with these alone; RESULTS.md
  // at commit 5aa2ccf, "Fusion: large tensors alone"). A host tensor of at least
  // this many bytes is reduced alone, where it lies, unless EngineOptions or
  // CONCORD_FUSION_IN_PLACE_BYTES say otherwise; 0: every tensor may be packed.
  std::size_t fusion_in_place_bytes = std::size_t{256} << 10;
};

class TuningTable {
 public:
  struct Threshold {
    std::size_t max_bytes;  // SIZE_MAX: no limit
    Algorithm algorithm;
  };
  struct Rule {
    int max_ranks;  // INT_MAX: no limit
    std::vector<Threshold> thresholds;
  };

  // Throws Error(InvalidArgument) naming `origin` and what is wrong.
  static TuningTable parse(std::string_view json, const std::string& origin);
  // The built-in table, measured on the development machine.
  static const TuningTable& built_in();

  Algorithm choose(std::size_t bytes, int ranks) const;
  const std::vector<Rule>& rules() const { return rules_; }
  const SizeThresholds& thresholds() const { return thresholds_; }

 private:
  std::vector<Rule> rules_;
  SizeThresholds thresholds_;
};

// The table in force: CONCORD_TUNING_FILE if set, else the built-in; loaded once.
const TuningTable& active_tuning_table();

// The active table's thresholds, where CONCORD_SHM_DIRECT_BYTES and
// CONCORD_CUDA_DIRECT_BYTES (when set) take precedence; resolved once, as the
// table and the configuration are (small messages read it on every call).
const SizeThresholds& size_thresholds();

// What `requested` means at this size and rank count: never Auto. Auto picks
// Hierarchical whenever ranks share a node (`ranks_share_a_node`, the same on
// every rank) and the table's flat algorithm otherwise.
Algorithm resolve_algorithm(Algorithm requested, std::size_t bytes, int ranks,
                            bool ranks_share_a_node);

// The table's choice among the flat algorithms (Ring where it names Hierarchical).
Algorithm choose_flat_algorithm(std::size_t bytes, int ranks);

}  // namespace concord::detail

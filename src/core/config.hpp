// Run-time configuration: every CONCORD_* variable is parsed here, except
// CONCORD_REDUCE_ISA, which the reduction layer reads when it picks its table.
#pragma once

#include <concord/types.hpp>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace concord::detail {

// The range of a ring pipeline segment, from the environment or AllreduceOptions.
inline constexpr std::size_t kMinRingSegmentBytes = 64;
inline constexpr std::size_t kMaxRingSegmentBytes = std::size_t{1} << 30;
// Hierarchical's pieces (CONCORD_HIERARCHICAL_PIECE_BYTES, the tuning table's
// hierarchical_piece_bytes): 1 TiB is past any message; larger would overflow
// the piece arithmetic.
inline constexpr std::size_t kMaxHierarchicalPieceBytes = std::size_t{1} << 40;

// CONCORD_CUDA_PEER: whether device allreduces among the ranks of one node take the
// device-synchronised path (kernels that meet in device memory).
enum class DevicePeerMode {
  Auto,  // where a probe at set-up finds the node's ranks' kernels running at once
  On,    // wherever the node's ranks can take it, without the probe
  Off,   // never: the IPC rounds, as before the path existed
};

// The longest cycle time CONCORD_CYCLE_TIME_MS and EngineOptions::cycle_time_ms accept.
constexpr double kMaxCycleTimeMs = 10000;
// The longest stall and transport limits, in seconds, that CONCORD_STALL_WARNING_S,
// CONCORD_STALL_TIMEOUT_S, CONCORD_TRANSPORT_TIMEOUT_S and EngineOptions accept.
constexpr double kMaxTimeoutS = 1e7;

struct Config {
  // CONCORD_ALLREDUCE_ALGORITHM: replaces Algorithm::Auto (not an explicit choice).
  std::optional<Algorithm> algorithm_override;
  // CONCORD_CHECK_ARGS=1: every collective first checks that all ranks agree on
  // count, dtype and op, and that none failed local validation.
  bool check_args = false;
  // CONCORD_RING_SEGMENT_BYTES: pipeline segment of the ring algorithm.
  std::size_t ring_segment_bytes = 256 * 1024;
  // CONCORD_TUNING_FILE: a JSON crossover table replacing the built-in one.
  std::string tuning_file;
  // CONCORD_VIRTUAL_NODES=k: split every physical node into k virtual nodes.
  int virtual_nodes = 1;
  // CONCORD_SHM=0: no shared-memory transport; Hierarchical and Auto then use
  // the flat algorithms over MPI.
  bool shm = true;
  // CONCORD_SHM_REGION_BYTES: size of each of a rank's four shared-memory
  // regions, i.e. the data one round of the shared-memory allreduce moves.
  std::size_t shm_region_bytes = 256 * 1024;
  // CONCORD_SHM_DIRECT_BYTES: messages up to this size take the
  // one-synchronisation shared-memory path, whatever the node's rank count (it
  // replaces the tuning table's shm_direct_bytes and shm_pair_direct_bytes).
  // Unset: those (size_thresholds() in collectives/tuning_table.hpp).
  std::optional<std::size_t> shm_direct_bytes;
  // CONCORD_HIERARCHICAL_SPREAD_BYTES: Hierarchical messages of at least this
  // size cross the network from every rank of a node (one shard each), smaller
  // ones from one leader per node. Unset: the tuning table's.
  std::optional<std::size_t> hierarchical_spread_bytes;
  // CONCORD_HIERARCHICAL_PIECE_BYTES: Hierarchical sends each shard across the
  // network in pieces of this size on a thread of its own, overlapping the
  // node's shared-memory phases (0: one step, no overlap). Unset: the tuning
  // table's hierarchical_piece_bytes.
  std::optional<std::size_t> hierarchical_piece_bytes;
  // CONCORD_SHM_PHASE_TIMES=1: the shared-memory allreduce times its steps
  // (collectives/shared/phases.hpp); for concord-bench's breakdown.
  bool shm_phase_times = false;
  // CONCORD_SHM_CMA=0: no single-copy reads (process_vm_readv) between the
  // ranks of a node; large shared-memory messages are copied through the segment.
  bool shm_cma = true;
  // CONCORD_SHM_HEAP_BYTES: each rank's shared heap, from which
  // concord::allocate_shared hands out buffers its node's peers use in
  // place. Address space only until buffers are allocated; 0: no heap.
  // Unset: default_heap_bytes() in collectives/shared/node_arena.hpp.
  std::optional<std::size_t> shm_heap_bytes;
  // CONCORD_SHM_PATH_CHOICE: `measure` (the default) times single-copy and
  // copied rounds per size class from shm_single_copy_bytes on and keeps the
  // faster; `threshold`: single copy for every message from there.
  bool shm_measure_paths = true;
  // CONCORD_SHM_SINGLE_COPY_BYTES: host messages of at least this size take the
  // single-copy rounds where available. Unset: the tuning table's.
  std::optional<std::size_t> shm_single_copy_bytes;
  // CONCORD_SHM_STREAM_BYTES: host messages of at least this size copy their
  // results out with non-temporal stores. Unset: the tuning table's
  // shm_stream_bytes.
  std::optional<std::size_t> shm_stream_bytes;

  // The engine (docs/ENGINE.md). CONCORD_FUSION_THRESHOLD: largest fusion
  // bucket in bytes (0: no fusion). Unset: the tuning table's
  // fusion_bytes_one_node or fusion_bytes_across_nodes, by whether the ranks
  // span nodes (default_fusion_threshold in engine/fusion.hpp).
  std::optional<std::size_t> fusion_threshold;
  // CONCORD_FUSION_IN_PLACE_BYTES: where buckets are packed, host tensors of at
  // least this size are reduced alone, where they lie (0: never). Unset: the
  // tuning table's fusion_in_place_bytes.
  std::optional<std::size_t> fusion_in_place_bytes;
  // CONCORD_CYCLE_TIME_MS: how long a negotiation cycle lasts at least.
  double cycle_time_ms = 1.0;
  // CONCORD_STALL_WARNING_S / CONCORD_STALL_TIMEOUT_S (0: never).
  double stall_warning_s = 60.0;
  double stall_timeout_s = 0.0;
  // CONCORD_TRANSPORT_TIMEOUT_S: the longest a wait for a peer may last before the
  // collective fails with ErrorCode::Timeout (0: never): a point-to-point wait over
  // MPI that sees no completion, or a device kernel's wait for a peer's flag. A peer
  // that died or whose link went down silently is otherwise waited on forever: MPI
  // over TCP does not notice a dead link, and a kernel cannot tell a dead peer from a
  // slow one.
  double transport_timeout_s = 1800.0;
  // CONCORD_TIMELINE: Chrome-trace output of rank 0 (empty: none).
  std::string timeline_path;

  // The device path (docs/GPU.md). CONCORD_POINTER_CACHE_ENTRIES: ranges the
  // pointer-attribute cache keeps (0: ask the driver on every call).
  std::size_t pointer_cache_entries = 4096;
  // CONCORD_CUDA_IPC=0: ranks sharing a node reduce device buffers through
  // pinned host memory instead of CUDA IPC.
  bool cuda_ipc = true;
  // CONCORD_CUDA_IPC_REGION_BYTES: each of a rank's IPC device regions: four for the
  // IPC rounds (the data one round moves), two for the device-synchronised path (the
  // largest piece one of its kernels takes). 32 MiB: every round costs a stream
  // synchronisation and a meeting on the host (measured on an H100, docs/GPU.md),
  // so larger rounds carry large messages faster, at 192 MiB of device memory a rank
  // for each communicator that runs device collectives on a node.
  std::size_t cuda_ipc_region_bytes = 32ull << 20;
  // CONCORD_CUDA_PEER: auto (default), on or off (DevicePeerMode).
  DevicePeerMode cuda_peer = DevicePeerMode::Auto;
  // CONCORD_CUDA_DIRECT_BYTES: device messages up to this size take the
  // one-synchronisation IPC path (each rank reduces everything). Unset: the
  // tuning table's cuda_direct_bytes.
  std::optional<std::size_t> cuda_direct_bytes;
  // CONCORD_CUDA_STAGING_BYTES: chunk of the pinned-host staging path.
  std::size_t cuda_staging_bytes = 4ull << 20;
  // CONCORD_NCCL=0: device buffers cross nodes through host staging over MPI
  // instead of NCCL.
  bool nccl = true;
  // CONCORD_NCCL_LIBRARY: the NCCL library file to load (empty: libnccl.so.2).
  std::string nccl_library;
};

using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// Parses the variables through `lookup`; throws Error(InvalidArgument) naming the
// variable and the accepted values on a bad value.
Config parse_config(const EnvLookup& lookup);

// The process's configuration from its environment, parsed once on first use.
const Config& config();

}  // namespace concord::detail

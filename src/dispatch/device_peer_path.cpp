#include "dispatch/device_peer_path.hpp"

#include "collectives/tuning_table.hpp"
#include "core/agreement.hpp"
#include "core/config.hpp"
#include "reduce/cuda_executor.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <vector>

namespace concord::detail {
namespace {

// The probe: meetings in one kernel per rank. Kernels that run at the same time
// meet in microseconds on a GPU (in tens of microseconds on the CUDA emulator,
// whose polling threads sleep 20 µs a round); ranks that take turns on a GPU meet
// once per switch between them, a time slice of a millisecond or more (or never,
// where nothing switches). Half a millisecond lies between. A wait may last a
// second: the ranks reach the probe at different times. A probe whose meetings were
// slow without timing out is tried again, up to three times in all, so that a
// moment's load on the host (descheduled processes of the emulator) is not taken
// for a GPU that switches; meetings that take turns are slow every time.
constexpr int kProbeRounds = 16;
constexpr int kProbeAttempts = 3;
constexpr std::uint64_t kProbeBoundNs = 1'000'000'000;
constexpr double kConcurrentMeetingNs = 500'000;

// How the set-up's exchanges wait (core/agreement.hpp): a rank that never
// comes fails its peers at the transport's deadline, and an abort stops them.
SetupWait setup_wait(const CommunicatorState& state) {
  return {"the device-synchronised path's set-up", &state.abort_signal};
}

std::uint64_t wait_bound_ns() {
  const double seconds = config().transport_timeout_s;
  if (seconds <= 0) return UINT64_MAX;
  return static_cast<std::uint64_t>(seconds * 1e9);
}

bool path_possible(const DeviceResources& res, const CommunicatorState& state) {
  const Topology& topo = state.topology;
  return config().cuda_peer != DevicePeerMode::Off && res.ipc_everywhere && topo.num_nodes == 1 &&
         topo.local_size >= 2 && topo.local_size <= cuda::kMaxPeerRanks;
}

// The communicator's rank of each rank of the node, in local-rank order.
std::vector<int> comm_ranks_of_node(const CommunicatorState& state) {
  return gather_over_ranks(state.topology.local.get(), state.rank, state.rank, setup_wait(state));
}

// Whether every rank's probe found the kernels meeting at once, agreed after each
// attempt (the ranks' probes meet each other, so they try again together). A probe
// that failed on some rank (an error, not a slow meeting) counts as "not at once".
bool probe_says_concurrent(DevicePeerPath& path, DeviceResources& res,
                           const CommunicatorState& state, CudaStream stream) {
  enum Verdict : int { kTimedOut = 0, kSlow = 1, kFast = 2 };
  cuda::PeerProbeResult* result = &path.records->probe;
  for (int attempt = 0; attempt < kProbeAttempts; ++attempt) {
    int verdict = kTimedOut;
    try {
      CudaExecutor fence(DataType::Float32, ReduceOp::Sum, stream, res.scratch);
      const ProbeOutcome outcome =
          probe_peer_concurrency(path.space, result, kProbeRounds, kProbeBoundNs, stream, fence);
      path.probe_meeting_ns = outcome.timed_out ? 0 : outcome.mean_meeting_ns;
      verdict = outcome.timed_out                                ? kTimedOut
                : outcome.mean_meeting_ns < kConcurrentMeetingNs ? kFast
                                                                 : kSlow;
    } catch (const Error& e) {
      if (ends_the_setup(e)) throw;
      fmt::print(stderr, "concord: rank {}: the device-synchronised path's probe failed: {}\n",
                 state.rank, e.what());
    }
    verdict = least_over_ranks(state.topology.local.get(), verdict, state.rank, setup_wait(state));
    if (verdict != kSlow) return verdict == kFast;
  }
  return false;
}

void say_not_concurrent(const CommunicatorState& state, double meeting_ns) {
  if (state.topology.local_rank != 0) return;
  static std::once_flag said;
  std::call_once(said, [&] {
    const std::string seen = meeting_ns > 0
                                 ? fmt::format("its meetings took {:.0f} us each", meeting_ns / 1e3)
                                 : std::string("a meeting timed out");
    fmt::print(stderr,
               "concord: rank {}: the kernels of this node's {} ranks do not run at the same "
               "time (ranks sharing a GPU without MPS; {}): device allreduces go through host "
               "memory up to {} bytes and through the IPC rounds above, both synchronising "
               "the stream. Start MPS before the job (nvidia-cuda-mps-control -d) for the "
               "device-synchronised path; CONCORD_CUDA_PEER=off skips this probe.\n",
               state.rank, state.topology.local_size, seen,
               size_thresholds().cuda_unshared_staging_bytes);
  });
}

}  // namespace

DevicePeerPath::~DevicePeerPath() {
  if (!called_) return;
  int previous = -1;
  const bool switched = arena && cudaGetDevice(&previous) == cudaSuccess &&
                        previous != arena->device() &&
                        cudaSetDevice(arena->device()) == cudaSuccess;
  cudaDeviceSynchronize();
  if (switched) cudaSetDevice(previous);
  cudaGetLastError();  // a destructor reports nothing; the next call finds a clean slate
}

void DevicePeerPath::allreduce(const void* send, void* recv, std::size_t count, DataType dtype,
                               ReduceOp op, CudaStream stream) {
  const bool capturing = cuda::is_capturing(stream);
  if (called_ && stream != last_stream_ && !capturing) last_call_.make_wait(stream);
  const SizeThresholds& t = size_thresholds();
  const std::size_t bytes = count * size_of(dtype);
  std::optional<PeerBuffers> direct;
  if (bytes >= t.cuda_peer_direct_bytes && !capturing) {
    direct = buffer_maps_.map(space, send, recv, bytes, stream);  // the same on every rank
  }
  if (direct) {
    allreduce_device_peer_direct(space, *direct, count, dtype, op, stream);
  } else {
    allreduce_device_peer(space, t.cuda_peer_one_shot_bytes, send, recv, count, dtype, op, stream);
  }
  if (capturing) return;
  last_call_.record(stream);
  last_stream_ = stream;
  called_ = true;
}

void refuse_capture(const char* why, int rank) {
  throw Error(
      ErrorCode::InvalidArgument, rank,
      fmt::format("allreduce: the stream is being captured into a CUDA graph, but {}", why));
}

int peer_block_limit(const CommunicatorState& state) {
  const int device = cuda::current_device();
  int sms = 0;
  cuda::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
              "cudaDeviceGetAttribute", state.rank);
  MPI_Comm local = state.topology.local.get();
  const int sharing = ranks_on_my_gpu(local, device, state.rank, setup_wait(state));
  const int resident = sms * cuda::peer_blocks_per_multiprocessor();
  const int share = std::max(
      1, std::min(static_cast<int>(size_thresholds().cuda_peer_blocks), resident / sharing));
  return least_over_ranks(local, share, state.rank, setup_wait(state));
}

DevicePeerPath* device_peer_path(DeviceResources& res, const CommunicatorState& state,
                                 CudaStream stream) {
  if (res.peer_tried) return res.peer.get();
  if (!path_possible(res, state)) {
    res.peer_tried = true;
    return nullptr;
  }
  if (cuda::is_capturing(stream)) {
    refuse_capture(
        "the first device allreduce that can take the device-synchronised path sets "
        "it up (allocates device memory and synchronises): make one before capturing",
        state.rank);
  }
  res.peer_tried = true;
  const Config& cfg = config();
  auto path = std::make_shared<DevicePeerPath>();
  std::string why;
  try {
    path->arena = CudaIpcArena::create(state.topology.local.get(),
                                       {.region_bytes = cfg.cuda_ipc_region_bytes,
                                        .regions = 2,
                                        .header_bytes = sizeof(cuda::PeerFlags)},
                                       state.rank, &why, setup_wait(state));
    path->pinned.reserve(sizeof(PeerRecords));
  } catch (const Error& e) {
    if (ends_the_setup(e)) throw;
    why = e.what();
  }
  if (!agree_or_fall_back(state.comm.get(), why, state.rank,
                          {"the device-synchronised path", "device buffers take the IPC rounds"},
                          setup_wait(state))) {
    return nullptr;
  }
  path->space.arena = path->arena.get();
  path->records = new (path->pinned.get()) PeerRecords{};
  path->space.record = &path->records->timeout;
  path->space.aborted = &path->records->aborted;
  path->space.comm_ranks = comm_ranks_of_node(state);
  path->space.timeout_ns = wait_bound_ns();
  path->space.blocks = peer_block_limit(state);
  path->concurrent =
      cfg.cuda_peer == DevicePeerMode::On || probe_says_concurrent(*path, res, state, stream);
  if (!path->concurrent) {
    path->arena.reset();
    path->space.arena = nullptr;
    say_not_concurrent(state, path->probe_meeting_ns);
  }
  res.peer = path;
  // Communicator::abort() reaches the kernels' waits through the records, which the
  // signal keeps alive (the state's signal goes before its device resources).
  state.abort_signal.mirror_into(&path->records->aborted,
                                 std::shared_ptr<const void>(path, &path->records->aborted));
  return res.peer.get();
}

}  // namespace concord::detail

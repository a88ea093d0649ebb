#include "dispatch/device_peer_buffers.hpp"

#include "device/pointer_query.hpp"

#include <algorithm>
#include <cstring>

namespace concord::detail {
namespace {

// What a rank tells its peers of one call's buffers.
struct Exported {
  cudaIpcMemHandle_t send{};
  cudaIpcMemHandle_t recv{};
  std::uint64_t send_offset = 0;
  std::uint64_t recv_offset = 0;
  std::uint32_t ok = 0;
};
static_assert(sizeof(Exported) <= kExchangeBytes);

// The IPC handle of the allocation that holds [p, p + bytes), and p's offset in it;
// false where there is none (not device memory from cudaMalloc, or IPC refuses it).
bool export_buffer(const void* p, std::size_t bytes, cudaIpcMemHandle_t* handle,
                   std::uint64_t* offset) {
  // Asked of the driver, not of the pointer cache: a range the cache holds may be
  // that of an allocation freed since, which would name the wrong memory.
  const PointerInfo info = query_pointer(p);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (info.device != Device::Cuda || info.bytes == 0 || at < info.base ||
      at + bytes > info.base + info.bytes) {
    return false;
  }
  if (cudaIpcGetMemHandle(handle, reinterpret_cast<void*>(info.base)) != cudaSuccess) {
    cudaGetLastError();  // refused: no error for the next call to find
    return false;
  }
  *offset = at - info.base;
  return true;
}

}  // namespace

PeerBufferMaps::~PeerBufferMaps() {
  for (const std::vector<Opened>& peer : opened_) {
    for (const Opened& o : peer) cudaIpcCloseMemHandle(o.base);
  }
  for (const Closing& c : closing_) cudaIpcCloseMemHandle(c.base);
  cudaGetLastError();
}

void PeerBufferMaps::close_finished() {
  std::erase_if(closing_, [](const Closing& c) {
    if (!c.after->done()) return false;
    cudaIpcCloseMemHandle(c.base);
    cudaGetLastError();
    return true;
  });
}

std::byte* PeerBufferMaps::open(int peer, const cudaIpcMemHandle_t& handle, CudaStream stream) {
  std::vector<Opened>& opened = opened_[peer];
  for (Opened& o : opened) {
    if (std::memcmp(&o.handle, &handle, sizeof handle) != 0) continue;
    o.used = exchanges_;
    return o.base;
  }
  if (opened.size() >= kMostPerPeer) {
    const auto oldest =
        std::min_element(opened.begin(), opened.end(),
                         [](const Opened& a, const Opened& b) { return a.used < b.used; });
    auto after = std::make_unique<cuda::Event>();
    after->record(stream);  // the stream follows every earlier call of the path
    closing_.push_back({oldest->base, std::move(after)});
    opened.erase(oldest);
  }
  void* p = nullptr;
  if (cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  opened.push_back({handle, static_cast<std::byte*>(p), exchanges_});
  return static_cast<std::byte*>(p);
}

std::optional<PeerBuffers> PeerBufferMaps::map(const PeerSpace& space, const void* send, void* recv,
                                               std::size_t bytes, CudaStream stream) {
  close_finished();
  const SharedArena& arena = *space.arena;
  const int me = arena.rank();
  const int ranks = arena.size();
  Exported mine;
  mine.ok = export_buffer(send, bytes, &mine.send, &mine.send_offset) &&
            export_buffer(recv, bytes, &mine.recv, &mine.recv_offset);
  std::vector<Exported> all(static_cast<std::size_t>(ranks));
  exchange_on_boards(space, ++exchanges_, &mine, sizeof mine, all.data());
  if (!std::all_of(all.begin(), all.end(), [](const Exported& e) { return e.ok != 0; })) {
    return std::nullopt;  // every rank sees the same entries: every rank returns here
  }
  PeerBuffers buffers;
  buffers.sends[me] = send;
  buffers.recvs[me] = recv;
  std::uint32_t mapped = 1;
  for (int r = 0; r < ranks; ++r) {
    if (r == me) continue;
    const Exported& e = all[static_cast<std::size_t>(r)];
    std::byte* s = open(r, e.send, stream);
    std::byte* d = open(r, e.recv, stream);
    if (s == nullptr || d == nullptr) {
      mapped = 0;
      continue;
    }
    buffers.sends[r] = s + e.send_offset;
    buffers.recvs[r] = d + e.recv_offset;
  }
  // Whether every rank mapped every peer's: then all take the direct kernel, else none.
  std::vector<std::uint32_t> everyone(static_cast<std::size_t>(ranks));
  exchange_on_boards(space, ++exchanges_, &mapped, sizeof mapped, everyone.data());
  if (std::find(everyone.begin(), everyone.end(), 0u) != everyone.end()) return std::nullopt;
  return buffers;
}

}  // namespace concord::detail

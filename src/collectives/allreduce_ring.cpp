// Ring allreduce: reduce-scatter around the ring, then allgather around it.
//
// Cost (p ranks, n bytes): 2*(p-1)*alpha + 2*(p-1)/p * n*beta + (p-1)/p * n*gamma.
// Bandwidth-optimal and every link carries the same load; the p-proportional
// latency term makes it the choice for large messages on few ranks.
//
// Pipelining: each block travels in segments. A segment is forwarded to the right
// as soon as it has been reduced, so the ring fills like a pipeline instead of
// moving one whole block per step, and reducing one segment overlaps receiving
// the next (kDepth receives in flight).
#include "collectives/algorithms.hpp"
#include "collectives/block_partition.hpp"

#include <algorithm>
#include <vector>

namespace concord::detail {
namespace {

constexpr std::size_t kDepth = 4;  // receive segments in flight

// One pipeline segment of a block (ring_segment_bytes long at most) and the step it
// travels in.
struct RingSegment {
  std::size_t offset;  // first element
  std::size_t count;   // elements
  int step;
};

}  // namespace

void allreduce_ring(Transport& t, void* buf, std::size_t count, const ReduceContext& ctx,
                    std::size_t segment_bytes) {
  const int p = t.size();
  if (p == 1 || count == 0) return;
  const int r = t.rank();
  const int right = (r + 1) % p;
  const int left = (r + p - 1) % p;
  const std::size_t esize = ctx.elem_size;
  auto* data = static_cast<std::byte*>(buf);
  const BlockPartition blocks(count, static_cast<std::size_t>(p));
  // No segment longer than a block: the scratch below is kDepth segments, and a
  // large segment for a small message would only allocate memory never used.
  const std::size_t seg_len =
      std::clamp<std::size_t>(segment_bytes / esize, 1, std::max<std::size_t>(1, blocks.largest()));

  auto block_at = [p](int k) { return static_cast<std::size_t>(((k % p) + p) % p); };
  auto append_segments = [&](std::size_t block, int step, std::vector<RingSegment>& out) {
    const std::size_t size = blocks.size(block);
    for (std::size_t off = 0; off < size; off += seg_len) {
      out.push_back({blocks.offset(block) + off, std::min(seg_len, size - off), step});
    }
  };
  auto bytes_at = [&](const RingSegment& sg) { return data + sg.offset * esize; };

  // Reduce-scatter: at step s, block r-s-1 arrives from the left and is reduced
  // in; after p-1 steps this rank holds the total of block r+1.
  std::vector<RingSegment> incoming;
  for (int s = 0; s < p - 1; ++s) append_segments(block_at(r - s - 1), s, incoming);
  std::vector<RingSegment> own;
  append_segments(block_at(r), 0, own);

  std::byte* tmp = ctx.exec->scratch(kDepth * seg_len * esize);
  auto slot = [&](std::size_t i) { return tmp + (i % kDepth) * seg_len * esize; };
  std::vector<Request> recvs(incoming.size());
  auto post = [&](std::size_t i) {
    recvs[i] = t.irecv(left, slot(i), incoming[i].count * esize, kTagRing);
  };
  for (std::size_t i = 0; i < std::min(kDepth, incoming.size()); ++i) post(i);

  // Sends of partial sums (must finish before their blocks are overwritten by the
  // allgather) and sends of final sums (allgather traffic, finished at the end).
  std::vector<Request> partial_sends;
  std::vector<Request> final_sends;
  for (const RingSegment& sg : own) {
    partial_sends.push_back(t.isend(right, bytes_at(sg), sg.count * esize, kTagRing));
  }
  for (std::size_t i = 0; i < incoming.size(); ++i) {
    const RingSegment& sg = incoming[i];
    t.wait(recvs[i]);
    ctx.exec->reduce(bytes_at(sg), bytes_at(sg), slot(i), sg.count);
    if (i + kDepth < incoming.size()) post(i + kDepth);
    auto& sends = sg.step < p - 2 ? partial_sends : final_sends;
    sends.push_back(t.isend(right, bytes_at(sg), sg.count * esize, kTagRing));
  }
  for (Request& req : partial_sends) t.wait(req);

  // Allgather: at step s, the total of block r-s arrives straight into place and
  // is passed on unless the right neighbour owns it.
  std::vector<RingSegment> gathered;
  for (int s = 0; s < p - 1; ++s) append_segments(block_at(r - s), s, gathered);
  std::vector<Request> gather_recvs;
  gather_recvs.reserve(gathered.size());
  for (const RingSegment& sg : gathered) {
    gather_recvs.push_back(t.irecv(left, bytes_at(sg), sg.count * esize, kTagRing));
  }
  for (std::size_t i = 0; i < gathered.size(); ++i) {
    const RingSegment& sg = gathered[i];
    t.wait(gather_recvs[i]);
    if (sg.step < p - 2) {
      final_sends.push_back(t.isend(right, bytes_at(sg), sg.count * esize, kTagRing));
    }
  }
  for (Request& req : final_sends) t.wait(req);
}

}  // namespace concord::detail

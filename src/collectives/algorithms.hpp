// The allreduce algorithms. Each works in place on `buf`, which holds this rank's
// contribution on entry and the reduction over every rank of the transport on
// return, bitwise identical everywhere. They speak only the Transport verbs.
#pragma once

#include "collectives/shared/message_view.hpp"
#include "reduce/executor.hpp"
#include "transport/shared_arena.hpp"
#include "transport/transport.hpp"

#include <concord/types.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <vector>

namespace concord::detail {

// What an algorithm needs to touch the message's elements: their size and type,
// and the Executor that copies, reduces and scales them where they lie (host
// memory, or a device's through its stream). A context, not a description of
// the call: it points at the executor's state (scratch, stream).
struct ReduceContext {
  std::size_t elem_size;  // bytes per element
  DataType dtype;
  Executor* exec;  // the message's memory: copies, reductions (commutative to the bit), scaling
};

void allreduce_ring(Transport& t, void* buf, std::size_t count, const ReduceContext& ctx,
                    std::size_t segment_bytes);
void allreduce_recursive_doubling(Transport& t, void* buf, std::size_t count,
                                  const ReduceContext& ctx);
void allreduce_rabenseifner(Transport& t, void* buf, std::size_t count, const ReduceContext& ctx);

// One of the three algorithms above, by name (Ring, RecursiveDoubling or
// ReduceScatterAllgather), in place on `buf`.
void allreduce_flat(Algorithm algorithm, Transport& t, void* buf, std::size_t count,
                    const ReduceContext& ctx, std::size_t ring_segment_bytes);

// Among the ranks of one node, through shared memory: src and dst may be the
// same buffer. Messages up to `direct_bytes` (and one region) take the
// one-synchronisation path where every rank reduces everything; larger ones are
// reduce-scattered and allgathered region by region.
struct SharedLimits {
  std::size_t direct_bytes = 0;  // up to this: the one-synchronisation path
  // From this size on, results are copied out with Executor::copy_streaming.
  std::size_t stream_bytes = SIZE_MAX;
  // From this size on, where the arena can read peers' memory and both views
  // are single unscaled buffers: single-copy rounds (no copy into the arena).
  std::size_t single_copy_bytes = SIZE_MAX;
  std::size_t single_copy_round_bytes = 0;  // a single-copy round's size (at least a region)
  // Past single_copy_bytes, time both paths per size class and keep the faster
  // (collectives/shared/path_choice.hpp); false: single copy throughout.
  bool measure_single_copy = true;
};
void allreduce_shared(SharedArena& node, const MessageView& src, const MessageView& dst,
                      const ReduceContext& ctx, const SharedLimits& limits);

// Two levels: the node's ranks reduce-scatter through shared memory into
// `shard_owners` shards (the smallest node's rank count, so every node has an
// owner for each), each shard is allreduced across nodes among its owners (the
// ranks with the same local rank) by `inter_node`, then the node's ranks
// allgather. `node` is null on a node with a single rank.
struct InterNodeStep {
  int ranks = 1;  // nodes taking part: the step is skipped when 1
  // Allreduces `count` elements at `shard` in place among the shard's owners (a
  // flat algorithm over MPI for host buffers; NCCL or host staging for device ones).
  std::function<void(void* shard, std::size_t count)> allreduce;
  // Nonzero: the shard crosses in pieces of about this many elements (0: in
  // one step). The same on every rank of the communicator: the node's ranks
  // interleave their rounds by it, and the owners of a shard match its pieces.
  std::size_t piece_elements = 0;
  // Where set, starts `allreduce` on another thread and returns at once; the
  // calls run one at a time, in the order started. Each piece's network step
  // then overlaps the node's shared-memory rounds of the pieces around it.
  std::function<std::future<void>(void* shard, std::size_t count)> start;
};
void allreduce_hierarchical(SharedArena* node, int shard_owners, const InterNodeStep& inter_node,
                            const void* src, void* dst, std::size_t count,
                            const ReduceContext& ctx);

// Root's `bytes` at `buf` to every rank of the transport.
void broadcast_binomial(Transport& t, void* buf, std::size_t bytes, int root);
// Rank r's block_bytes[r] bytes (`mine`) to every rank; `out` receives all blocks
// in rank order. `mine` may already be at its place in `out`.
void allgatherv_ring(Transport& t, const void* mine, void* out,
                     const std::vector<std::size_t>& block_bytes);
// send_bytes[r] bytes of `send` (blocks in rank order) to rank r; recv_bytes[r]
// bytes from rank r into `recv` (blocks in rank order). send_bytes[me] must
// equal recv_bytes[me]; send and recv must not overlap.
void alltoallv_pairwise(Transport& t, const void* send, const std::vector<std::size_t>& send_bytes,
                        void* recv, const std::vector<std::size_t>& recv_bytes);

// Message tags, one per algorithm so a stray message can never be mistaken for
// another algorithm's.
enum Tag : int {
  kTagRing = 101,
  kTagRecursiveDoubling = 102,
  kTagRabenseifner = 103,
  kTagBroadcast = 104,
  kTagAllgather = 105,
  kTagAlltoall = 106,
  kTagCallAgreement = 107,  // not an algorithm's: a checked call's signatures (dispatch)
};

}  // namespace concord::detail

// The shared-memory node algorithms under stream semantics, on the CPU: an
// executor that, like a CUDA stream, only queues copies, reductions and scales
// and runs them at fence(). If an algorithm told its peers that data is there
// before fencing, or read results on the host without fencing, peers would see
// stale regions and these results would be wrong. This is the discipline the
// CUDA executor relies on (docs/GPU.md), checked without a GPU.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "collectives/algorithms.hpp"
#include "collectives/shared/node_arena.hpp"
#include "collectives/tuning_table.hpp"
#include "core/communicator_state.hpp"
#include "mpi/test_support.hpp"
#include "reduce/host_executor.hpp"
#include "transport/mpi_transport.hpp"

#include <functional>
#include <vector>

namespace {

using namespace concord;
using namespace concord::test;

class DeferredExecutor final : public detail::Executor {
 public:
  DeferredExecutor(DataType dtype, ReduceOp op) : host_(dtype, op) {}

  void reduce(void* dst, const void* a, const void* b, std::size_t count) override {
    queue_.push_back([=, this] { host_.reduce(dst, a, b, count); });
  }
  void reduce_many(void* dst, const void* const* srcs, std::size_t n, std::size_t count) override {
    std::vector<const void*> sources(srcs, srcs + n);  // the caller's array is transient
    queue_.push_back([=, this] { host_.reduce_many(dst, sources.data(), n, count); });
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    queue_.push_back([=, this] { host_.copy(dst, src, bytes); });
  }
  void scale(void* buf, std::size_t count, double factor) override {
    queue_.push_back([=, this] { host_.scale(buf, count, factor); });
  }
  std::byte* scratch(std::size_t bytes) override {
    fence();  // growing device scratch frees the old buffer, which waits for the device
    return host_.scratch(bytes);
  }
  void fence() override {
    for (auto& op : queue_) op();
    queue_.clear();
  }
  std::size_t pending() const { return queue_.size(); }

 private:
  detail::HostExecutor host_;
  std::vector<std::function<void()>> queue_;
};

struct Case {
  DataType dtype;
  ReduceOp op;
};

// Runs `algorithm(exec, ctx, op, send, recv, count)` for a few dtypes, ops and
// counts and checks recv against the serial reference once the executor is fenced.
template <class Algorithm>
void check_against_reference(const Communicator& comm, Algorithm&& algorithm) {
  const int rank = comm.rank();
  const int ranks = comm.size();
  for (Case c : {Case{DataType::Float32, ReduceOp::Sum}, Case{DataType::Int32, ReduceOp::Max},
                 Case{DataType::BFloat16, ReduceOp::Sum}, Case{DataType::Float64, ReduceOp::Min}}) {
    const std::size_t esize = size_of(c.dtype);
    for (std::size_t count :
         {std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{70001}}) {
      for (bool in_place : {false, true}) {
        INFO("ranks=" << ranks << " dtype=" << to_string(c.dtype) << " op=" << to_string(c.op)
                      << " count=" << count << " in_place=" << in_place);
        const ReferenceCase ref(rank, ranks, count, c.dtype, c.op);
        std::vector<std::byte> send = ref.input;
        std::vector<std::byte> recv(count * esize, std::byte{0x5a});
        DeferredExecutor exec(c.dtype, c.op);
        const detail::ReduceContext ctx{esize, c.dtype, &exec};
        std::byte* out = in_place ? send.data() : recv.data();
        algorithm(exec, ctx, c.op, send.data(), out, count);
        exec.fence();  // as the device path does before it returns
        const std::vector<std::byte> got(out, out + count * esize);
        CHECK(ref.mismatch(got) == "");
        CHECK(exec.pending() == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("the node allreduce is correct when copies and reductions run only at fences",
          "[deferred]") {
  Communicator comm = Communicator::world();
  const detail::CommunicatorState& state = comm.state();
  detail::SharedArena* arena = detail::node_arena(state);
  if (comm.size() < 2 || state.topology.num_nodes != 1 || !state.arena_everywhere) {
    SUCCEED("needs 2+ ranks on one node with shared memory");
    return;
  }
  for (std::size_t direct_bytes : {std::size_t{0}, std::size_t{1} << 20}) {
    check_against_reference(comm, [&](DeferredExecutor&, const detail::ReduceContext& ctx, ReduceOp,
                                      const void* send, void* recv, std::size_t count) {
      const detail::MessageView src(send, count, ctx.elem_size);
      const detail::MessageView dst(recv, count, ctx.elem_size);
      detail::allreduce_shared(*arena, src, dst, ctx, detail::SharedLimits{direct_bytes});
    });
  }
}

TEST_CASE("the hierarchical allreduce is correct when copies and reductions run only at fences",
          "[deferred]") {
  Communicator comm = Communicator::world();
  const detail::CommunicatorState& state = comm.state();
  const detail::Topology& topo = state.topology;
  detail::SharedArena* arena = detail::node_arena(state);
  if (topo.num_nodes < 2 || !state.arena_everywhere) {
    SUCCEED("needs 2+ (virtual) nodes with shared memory");
    return;
  }
  check_against_reference(comm, [&](DeferredExecutor& exec, const detail::ReduceContext& ctx,
                                    ReduceOp op, const void* send, void* recv, std::size_t count) {
    // The cross-node step as the device path's host staging does it: fence, then a
    // host algorithm over MPI on the shard.
    detail::MpiTransport cross(topo.cross.get());
    detail::InterNodeStep inter;
    inter.ranks = cross.size();
    inter.allreduce = [&](void* shard, std::size_t n) {
      exec.fence();
      detail::HostExecutor host(ctx.dtype, op);
      const detail::ReduceContext host_ctx{ctx.elem_size, ctx.dtype, &host};
      detail::allreduce_flat(detail::choose_flat_algorithm(n * ctx.elem_size, cross.size()), cross,
                             shard, n, host_ctx, 1 << 18);
    };
    detail::allreduce_hierarchical(arena, topo.min_local_size, inter, send, recv, count, ctx);
  });
}

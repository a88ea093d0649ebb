#include "allreduce/allreduce_impls.hpp"
#if CONCORD_BENCH_NCCL
#include "allreduce/peer_bench.hpp"
#endif
#include "common/elements.hpp"

#include "core/communicator_state.hpp"
#include "transport/shm_arena.hpp"

#include <concord/allreduce.hpp>
#include <concord/engine.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace concord::bench {
namespace {

// The memory roofline: the least traffic that produces an allreduce's output on a
// rank is reading its input once and writing its output once. Every rank copies
// its n bytes from the input to the output buffer (glibc memcpy, which switches
// to non-temporal stores past its cache threshold, as a tuned copy would), timed
// the same way as the allreduces: barrier-aligned rounds, all ranks at once,
// interleaved size by size.
Impl roofline_impl(std::size_t esize) {
  return {"roofline", "memcpy",
          [esize](const void* s, void* r, std::size_t n) { std::memcpy(r, s, n * esize); }, false};
}

}  // namespace

#if CONCORD_BENCH_NCCL
// The implementations on device buffers; nccl is skipped, with the reason, where
// it cannot run.
std::vector<Impl> make_device_impls(const AllreduceOptions& o, const Communicator& comm,
                                    DeviceBench& device) {
  using detail::DevicePathPreference;
  // concord with every device call on one path, on a communicator of its own.
  const std::pair<const char*, DevicePathPreference> fixed_paths[] = {
      {"concord-peer", DevicePathPreference::DeviceSynchronised},
      {"concord-rounds", DevicePathPreference::IpcRounds},
      {"concord-staged", DevicePathPreference::HostStaging}};
  std::vector<Impl> impls;
  const auto add = [&](const std::string& name, const std::string& algorithm, RunFn run,
                       SyncFn sync) {
    Impl impl{name, algorithm, std::move(run)};
    impl.sync = std::move(sync);
    impls.push_back(std::move(impl));
  };
  for (const std::string& name : o.impls) {
    const auto fixed = std::find_if(std::begin(fixed_paths), std::end(fixed_paths),
                                    [&](const auto& p) { return name == p.first; });
    if (name == "concord") {
      for (Algorithm a : o.algorithms) {
        add(name, std::string(to_string(a)), device.concord_impl(o, a),
            device.concord_sync(DevicePathPreference::Auto));
      }
    } else if (fixed != std::end(fixed_paths)) {
      RunFn run = device.concord_impl(o, Algorithm::Auto, fixed->second);
      std::string why;
      if (fixed->second == DevicePathPreference::DeviceSynchronised &&
          !device.device_synchronised_runs(&why)) {
        if (comm.rank() == 0) fmt::print(stderr, "concord-bench: skipping {}: {}\n", name, why);
        continue;
      }
      add(name, "auto", std::move(run), device.concord_sync(fixed->second));
    } else if (name == "mpi") {
      add(name, "mpi-host-staged", device.mpi_staged_impl(o), device.synchronize());
    } else if (name == "device-one-shot" || name == "device-two-shot") {
      auto [run, sync] = peer_kernel_impl(device, comm, o, name == "device-two-shot");
      add(name, name, std::move(run), std::move(sync));
    } else if (name == "nccl") {
      std::string why;
      if (auto run = device.nccl_impl(o, &why)) {
        add(name, "nccl", *run, device.synchronize());
      } else if (comm.rank() == 0) {
        fmt::print(stderr, "concord-bench: skipping nccl: {}\n", why);
      }
    } else if (name == "concord-engine") {
      throw std::invalid_argument(
          "--impl concord-engine times host buffers only: run it without "
          "--device cuda");
    } else {
      throw std::invalid_argument(
          "--impl: unknown implementation '" + name +
          "' (accepted: concord, concord-peer, concord-rounds, concord-staged, mpi, nccl, "
          "device-one-shot, device-two-shot; roofline is host only)");
    }
  }
  if (impls.empty()) throw std::invalid_argument("--impl: nothing left to run");
  return impls;
}
#endif

namespace {

// `concord-copy`: concord's own calls with single-copy reads switched off on
// this communicator's arena for their duration (every rank runs the same impl
// at the same time, so all agree), i.e. the copy-in/copy-out path, interleaved
// with the default one in the same run.
class SingleCopyOff {
 public:
  explicit SingleCopyOff(const Communicator& comm)
      : arena_(dynamic_cast<detail::ShmArena*>(comm.state().arena.get())),
        was_(arena_ != nullptr && arena_->can_read_peer()) {
    if (arena_ != nullptr) arena_->set_peer_reads(false);
  }
  ~SingleCopyOff() {
    if (arena_ != nullptr) arena_->set_peer_reads(was_);
  }
  SingleCopyOff(const SingleCopyOff&) = delete;
  SingleCopyOff& operator=(const SingleCopyOff&) = delete;

 private:
  detail::ShmArena* arena_;
  bool was_;
};

// MPI_Allreduce on the same buffers; Avg as MPI_SUM plus one scale pass.
Impl mpi_impl(const std::string& name, const AllreduceOptions& o, const Communicator& comm) {
  auto type = mpi_type(o.dtype);
  if (!type) {
    throw std::invalid_argument(
        fmt::format("--impl {}: this MPI has no datatype for {}; compare with another -T", name,
                    to_string(o.dtype)));
  }
  if (o.op == ReduceOp::Avg && (o.dtype == DataType::Float16)) {
    throw std::invalid_argument(
        fmt::format("--impl {}: -o avg is measured as MPI_SUM plus a scale, "
                    "which is not available for float16 here",
                    name));
  }
  MPI_Comm world = comm.mpi_comm();
  const int p = comm.size();
  return {name, "mpi", [world, type, o, p](const void* s, void* r, std::size_t n) {
            MPI_Allreduce(s, r, static_cast<int>(n), *type, mpi_op(o.op), world);
            // MPI has no average: one scale pass, as concord does.
            if (o.op == ReduceOp::Avg) {
              if (o.dtype == DataType::Float32) {
                auto* f = static_cast<float*>(r);
                for (std::size_t i = 0; i < n; ++i) f[i] *= 1.0f / static_cast<float>(p);
              } else {
                auto* d = static_cast<double*>(r);
                for (std::size_t i = 0; i < n; ++i) d[i] *= 1.0 / p;
              }
            }
          }};
}

// concord's allreduce on `comm`, one impl per requested algorithm.
void add_concord_impls(std::vector<Impl>& impls, const std::string& name, const AllreduceOptions& o,
                       const Communicator& comm, bool on_shared) {
  for (Algorithm a : o.algorithms) {
    impls.push_back({name, std::string(to_string(a)),
                     [&comm, o, a](const void* s, void* r, std::size_t n) {
                       allreduce(s, r, n, o.dtype, o.op, comm, {a});
                     },
                     true, on_shared});
  }
}

// `concord-engine`: the same allreduce through concord's fusion engine, as the
// Python, TensorFlow and torch bindings reach it: one grouped enqueue of the
// buffer and a wait, so the engine starts its cycle at once. What it adds to
// `concord` is the engine's per-call cost (its thread's two hand-offs and the
// cycle's negotiation). The engine reduces in place, so an out-of-place call
// first copies the input to the output (a pass over the buffer that `concord`
// does not make: compare the two on small and medium messages).
Impl engine_impl(const AllreduceOptions& o, const Communicator& comm) {
  auto engine = std::make_shared<Engine>(comm);  // collective: every rank parses --impl alike
  const std::size_t esize = size_of(o.dtype);
  const std::vector<std::string> names{"concord-bench/allreduce"};  // made once, not per call
  return {"concord-engine", "engine",
          [engine, o, esize, names](const void* s, void* r, std::size_t n) {
            if (s != r) std::memcpy(r, s, n * esize);
            for (Handle& h : engine->enqueue_grouped_allreduce(names, {TensorView{r, n, o.dtype}},
                                                               o.op, 1.0, 1.0)) {
              h.wait();
            }
          }};
}

}  // namespace

std::vector<Impl> make_impls(const AllreduceOptions& o, const Communicator& comm,
                             const Communicator& shared_comm) {
  std::vector<Impl> impls;
  for (const std::string& name : o.impls) {
    if (name == "concord") {
      add_concord_impls(impls, name, o, comm, false);
    } else if (name == "mpi") {
      impls.push_back(mpi_impl(name, o, comm));
    } else if (name == "concord-engine") {
      impls.push_back(engine_impl(o, comm));
    } else if (name == "concord-copy") {
      for (Algorithm a : o.algorithms) {
        impls.push_back(
            {name, std::string(to_string(a)), [&comm, o, a](const void* s, void* r, std::size_t n) {
               SingleCopyOff off(comm);
               allreduce(s, r, n, o.dtype, o.op, comm, {a});
             }});
      }
    } else if (name == "concord-shared") {
      // Its own communicator, so that the node's measured path choice
      // (collectives/shared/path_choice.hpp) times its messages apart from concord's.
      add_concord_impls(impls, name, o, shared_comm, true);
    } else if (name == "mpi-shared") {
      // MPI_Allreduce on the same allocate_shared buffers as concord-shared:
      // whether MPI too gains from where the buffers lie.
      Impl impl = mpi_impl(name, o, comm);
      impl.on_shared = true;
      impls.push_back(impl);
    } else if (name == "roofline") {
      impls.push_back(roofline_impl(size_of(o.dtype)));
    } else if (name == "roofline-shared") {
      Impl impl = roofline_impl(size_of(o.dtype));
      impl.name = name;
      impl.on_shared = true;
      impls.push_back(impl);
    } else if (name == "nccl" || name == "device-one-shot" || name == "device-two-shot" ||
               name == "concord-peer" || name == "concord-rounds" || name == "concord-staged") {
      throw std::invalid_argument("--impl " + name + " needs device buffers: add --device cuda");
    } else {
      throw std::invalid_argument(
          "--impl: unknown implementation '" + name +
          "' (accepted: concord, concord-copy, concord-engine, concord-shared, mpi, mpi-shared, "
          "roofline, roofline-shared; with --device cuda: concord-peer, concord-rounds, "
          "concord-staged, nccl, device-one-shot, device-two-shot)");
    }
  }
  return impls;
}

bool wants_shared(const AllreduceOptions& o) {
  return std::any_of(o.impls.begin(), o.impls.end(),
                     [](const std::string& name) { return name.ends_with("-shared"); });
}

}  // namespace concord::bench

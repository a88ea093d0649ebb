#include "allreduce_bench.hpp"
#include "elements.hpp"
#include "shm_phases.hpp"
#if CONCORD_BENCH_NCCL
#include "device_bench.hpp"
#endif

#include "core/communicator_state.hpp"
#include "transport/shm_arena.hpp"

#include <concord/allreduce.hpp>
#include <concord/error.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <sys/mman.h>
#include <functional>
#include <memory>
#include <stdexcept>

namespace concord::bench {
namespace {

// Interleaving granularity: each implementation runs its iterations in this many
// rounds, alternating with the others, so slow drifts of a noisy machine hit all
// implementations alike.
constexpr int kRounds = 4;

struct Impl {
  std::string name;
  std::string algorithm;
  std::function<void(const void*, void*, std::size_t)> run;
  bool is_allreduce = true;  // false for the roofline: its output is a copy, not checked
};

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

#if CONCORD_BENCH_NCCL
// The implementations on device buffers; nccl is skipped, with the reason, where
// it cannot run.
std::vector<Impl> make_device_impls(const AllreduceOptions& o, const Communicator& comm,
                                    DeviceBench& device) {
  std::vector<Impl> impls;
  for (const std::string& name : o.impls) {
    if (name == "concord") {
      for (Algorithm a : o.algorithms) {
        impls.push_back({name, std::string(to_string(a)), device.concord_impl(o, a)});
      }
    } else if (name == "mpi") {
      impls.push_back({name, "mpi-host-staged", device.mpi_staged_impl(o)});
    } else if (name == "nccl") {
      std::string why;
      if (auto run = device.nccl_impl(o, &why)) {
        impls.push_back({name, "nccl", *run});
      } else if (comm.rank() == 0) {
        fmt::print(stderr, "concord-bench: skipping nccl: {}\n", why);
      }
    } else {
      throw std::invalid_argument("--impl: unknown implementation '" + name +
                                  "' (accepted: concord, mpi, nccl; roofline is host only)");
    }
  }
  if (impls.empty()) throw std::invalid_argument("--impl: nothing left to run");
  return impls;
}
#endif

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

std::vector<Impl> make_impls(const AllreduceOptions& o, const Communicator& comm) {
  std::vector<Impl> impls;
  for (const std::string& name : o.impls) {
    if (name == "concord") {
      for (Algorithm a : o.algorithms) {
        impls.push_back(
            {name, std::string(to_string(a)), [&comm, o, a](const void* s, void* r, std::size_t n) {
               allreduce(s, r, n, o.dtype, o.op, comm, {a});
             }});
      }
    } else if (name == "mpi") {
      auto type = mpi_type(o.dtype);
      if (!type) {
        throw std::invalid_argument(
            fmt::format("--impl mpi: this MPI has no datatype for {}; compare with another -T",
                        to_string(o.dtype)));
      }
      if (o.op == ReduceOp::Avg && (o.dtype == DataType::Float16)) {
        throw std::invalid_argument(
            "--impl mpi: -o avg is measured as MPI_SUM plus a scale, "
            "which is not available for float16 here");
      }
      MPI_Comm world = comm.mpi_comm();
      const int p = comm.size();
      impls.push_back({name, "mpi", [world, type, o, p](const void* s, void* r, std::size_t n) {
                         MPI_Allreduce(s, r, static_cast<int>(n), *type, mpi_op(o.op), world);
                         // MPI has no average: one scale pass, as concord does.
                         if (o.op == ReduceOp::Avg) {
                           if (o.dtype == DataType::Float32) {
                             auto* f = static_cast<float*>(r);
                             for (std::size_t i = 0; i < n; ++i)
                               f[i] *= 1.0f / static_cast<float>(p);
                           } else {
                             auto* d = static_cast<double*>(r);
                             for (std::size_t i = 0; i < n; ++i) d[i] *= 1.0 / p;
                           }
                         }
                       }});
    } else if (name == "concord-copy") {
      for (Algorithm a : o.algorithms) {
        impls.push_back(
            {name, std::string(to_string(a)), [&comm, o, a](const void* s, void* r, std::size_t n) {
               SingleCopyOff off(comm);
               allreduce(s, r, n, o.dtype, o.op, comm, {a});
             }});
      }
    } else if (name == "roofline") {
      impls.push_back(roofline_impl(size_of(o.dtype)));
    } else if (name == "nccl") {
      throw std::invalid_argument("--impl nccl needs device buffers: add --device cuda");
    } else {
      throw std::invalid_argument("--impl: unknown implementation '" + name +
                                  "' (accepted: concord, concord-copy, mpi, roofline, nccl)");
    }
  }
  return impls;
}

// Validation inputs: small integers whose reduction is exact in every dtype.
double pattern(int rank, std::size_t i, DataType dtype, ReduceOp op) {
  const auto k = static_cast<int>(i % 1009);
  switch (op) {
    case ReduceOp::Prod:
      return dtype == DataType::UInt8 ? 1.0 : ((rank + k) % 2 == 0 ? 1.0 : -1.0);
    case ReduceOp::Min:
    case ReduceOp::Max:
      return dtype == DataType::UInt8 ? (rank * 3 + k) % 11 : (rank * 3 + k) % 11 - 5;
    default:
      return dtype == DataType::UInt8 ? (rank + k) % 5 : (rank + k) % 5 - 2;
  }
}

class Validator {
 public:
  Validator(const AllreduceOptions& o, int rank, int ranks, std::size_t max_count)
      : o_(o), esize_(size_of(o.dtype)), input_(max_count * esize_), expected_(max_count * esize_) {
    for (std::size_t i = 0; i < max_count; ++i) {
      store_element(&input_[i * esize_], o.dtype, pattern(rank, i, o.dtype, o.op));
      double acc = pattern(0, i, o.dtype, o.op);
      for (int r = 1; r < ranks; ++r) {
        const double v = pattern(r, i, o.dtype, o.op);
        switch (o.op) {
          case ReduceOp::Prod:
            acc *= v;
            break;
          case ReduceOp::Min:
            acc = std::min(acc, v);
            break;
          case ReduceOp::Max:
            acc = std::max(acc, v);
            break;
          default:
            acc += v;
        }
      }
      if (o.op == ReduceOp::Avg) acc /= ranks;
      expected_avg_.push_back(acc);
      store_element(&expected_[i * esize_], o.dtype, acc);
    }
  }
  void fill(std::byte* send, std::size_t count) const {
    std::memcpy(send, input_.data(), count * esize_);
  }
  bool check(const std::byte* recv, std::size_t count) const {
    if (o_.op != ReduceOp::Avg) return std::memcmp(recv, expected_.data(), count * esize_) == 0;
    // The average need not be representable: allow the dtype's rounding.
    const double eps = o_.dtype == DataType::Float16    ? 1e-3
                       : o_.dtype == DataType::BFloat16 ? 8e-3
                       : o_.dtype == DataType::Float32  ? 1e-6
                                                        : 1e-14;
    for (std::size_t i = 0; i < count; ++i) {
      const double got = load_element(recv + i * esize_, o_.dtype);
      if (!(std::fabs(got - expected_avg_[i]) <= eps * std::max(1.0, std::fabs(expected_avg_[i]))))
        return false;
    }
    return true;
  }

 private:
  AllreduceOptions o_;
  std::size_t esize_;
  std::vector<std::byte> input_;
  std::vector<std::byte> expected_;
  std::vector<double> expected_avg_;
};

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kHugePage}); }
  static constexpr std::size_t kHugePage = 2 << 20;
};
using Buffer = std::unique_ptr<std::byte[], AlignedFree>;
// Buffers are 2 MiB-aligned and ask for transparent huge pages, as the
// allocators of training frameworks do for large tensors: with 4 KiB pages,
// TLB misses (expensive under virtualisation) dominate large messages and the
// benchmark would measure page walks instead of the collectives.
Buffer make_buffer(std::size_t bytes) {
  Buffer b(static_cast<std::byte*>(
      ::operator new[](std::max<std::size_t>(bytes, 1), std::align_val_t{AlignedFree::kHugePage})));
  if (bytes >= AlignedFree::kHugePage) ::madvise(b.get(), bytes, MADV_HUGEPAGE);
  std::memset(b.get(), 0, bytes);  // first touch outside the timed region
  return b;
}

}  // namespace

std::vector<Measurement> run_allreduce_bench(
    const AllreduceOptions& o, const Communicator& comm,
    const std::function<void(const std::vector<Measurement>&)>& on_size) {
  const std::size_t esize = size_of(o.dtype);
  const int p = comm.size();
  MPI_Comm world = comm.mpi_comm();
  const std::size_t max_count = o.max_bytes / esize;
  // Host buffers, or device buffers with host copies the validator works on.
  Buffer host_send = make_buffer(max_count * esize);
  Buffer host_recv = make_buffer(max_count * esize);
  std::byte* send = host_send.get();
  std::byte* recv = host_recv.get();
  std::function<void(std::size_t)> upload_send = [](std::size_t) {};
  std::function<void(std::size_t)> download_recv = [](std::size_t) {};
  // A result that is never written shows as wrong: recv starts as 0xff bytes.
  std::function<void(std::size_t)> poison_recv = [&](std::size_t n) {
    std::memset(recv, 0xff, n * esize);
  };
  std::vector<Impl> impls;
#if CONCORD_BENCH_NCCL
  std::unique_ptr<DeviceBench> device;
  if (o.device == Device::Cuda) {
    device = std::make_unique<DeviceBench>(comm);
    if (comm.rank() == 0) fmt::print("# Device: {}\n", device->describe());
    send = device->allocate(max_count * esize);
    recv = device->allocate(max_count * esize);
    upload_send = [&](std::size_t n) { device->upload(send, host_send.get(), n * esize); };
    download_recv = [&](std::size_t n) { device->download(host_recv.get(), recv, n * esize); };
    poison_recv = [&](std::size_t n) {
      std::memset(host_recv.get(), 0xff, n * esize);
      device->upload(recv, host_recv.get(), n * esize);
    };
    impls = make_device_impls(o, comm, *device);
  }
#else
  if (o.device == Device::Cuda) {
    throw std::invalid_argument(
        "--device cuda: this concord-bench was built without CUDA and NCCL");
  }
#endif
  if (o.device == Device::Cpu) impls = make_impls(o, comm);
  std::optional<Validator> validator;
  if (o.validate)
    validator.emplace(o, comm.rank(), p, max_count);
  else {
    // Any finite input: take the validation pattern's first values.
    Validator(o, comm.rank(), 1, max_count).fill(host_send.get(), max_count);
    upload_send(max_count);
  }

  std::vector<Measurement> all;
  ShmPhaseSampler phases(impls.size());
  std::vector<std::string> labels;
  for (const Impl& impl : impls) labels.push_back(impl.name + ":" + impl.algorithm);
  for (const std::size_t bytes : size_steps(o.min_bytes, o.max_bytes, esize)) {
    const std::size_t count = bytes / esize;
    const int iterations = iterations_for(o, bytes);
    const int warmup = warmup_for(o, bytes);
    std::vector<double> seconds(impls.size(), 0.0);
    std::vector<int> valid(impls.size(), 1);

    // With -c, each implementation's result is checked in calls of its own, before
    // and after the timed rounds, so that checking never changes what is timed:
    // the timed loop is the same with or without -c.
    auto checked_call = [&](std::size_t which) {
      if (!impls[which].is_allreduce) return;
      validator->fill(host_send.get(), count);
      upload_send(count);
      poison_recv(count);
      MPI_Barrier(world);
      impls[which].run(send, recv, count);
      download_recv(count);
      if (!validator->check(host_recv.get(), count)) valid[which] = 0;
    };
    for (std::size_t k = 0; k < impls.size(); ++k) {
      if (validator) checked_call(k);
      for (int i = 0; i < warmup; ++i) impls[k].run(send, recv, count);
    }
    for (int round = 0; round < kRounds; ++round) {
      const int round_iters = iterations / kRounds + (round < iterations % kRounds ? 1 : 0);
      for (std::size_t k = 0; k < impls.size(); ++k) {
        // Alternate the order from round to round.
        const std::size_t which = round % 2 == 0 ? k : impls.size() - 1 - k;
        const Impl& impl = impls[which];
        MPI_Barrier(world);
        phases.begin();
        const double t0 = MPI_Wtime();
        for (int i = 0; i < round_iters; ++i) impl.run(send, recv, count);
        seconds[which] += MPI_Wtime() - t0;
        phases.end(which);
      }
    }
    // Checked again after the timed calls: state they left behind (caches,
    // arenas, scratch) must not change the next result.
    if (validator) {
      for (std::size_t k = 0; k < impls.size(); ++k) checked_call(k);
    }

    std::vector<Measurement> row;
    for (std::size_t k = 0; k < impls.size(); ++k) {
      double mean_us = seconds[k] * 1e6 / iterations;
      double sum = 0, lo = 0, hi = 0;
      int all_valid = 0;
      MPI_Reduce(&mean_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, world);
      MPI_Reduce(&mean_us, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, world);
      MPI_Reduce(&mean_us, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, world);
      // On every rank, which all exit with the same status.
      MPI_Allreduce(&valid[k], &all_valid, 1, MPI_INT, MPI_MIN, world);
      Measurement m;
      m.impl = impls[k].name;
      m.algorithm = impls[k].algorithm;
      m.bytes = bytes;
      m.count = count;
      m.avg_us = sum / p;
      m.min_us = lo;
      m.max_us = hi;
      m.iterations = iterations;
      m.warmup = warmup;
      m.busbw_gbps =
          p > 1 ? static_cast<double>(bytes) / (m.avg_us * 1e-6) * 2.0 * (p - 1) / p / 1e9 : 0.0;
      if (o.validate && impls[k].is_allreduce) m.validated = all_valid != 0;
      row.push_back(m);
    }
    if (comm.rank() == 0) on_size(row);
    if (ShmPhaseSampler::enabled()) phases.report(world, bytes, iterations, labels);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

}  // namespace concord::bench

#include "allreduce/allreduce_bench.hpp"
#include "allreduce/allreduce_impls.hpp"
#include "allreduce/allreduce_validator.hpp"
#include "allreduce/shm_phases.hpp"
#include "common/elements.hpp"
#if CONCORD_BENCH_NCCL
#include "allreduce/device_bench.hpp"
#endif

#include <concord/allreduce.hpp>
#include <concord/error.hpp>
#include <concord/shared_buffer.hpp>

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

namespace concord::bench {
namespace {

// Interleaving granularity: each implementation runs its iterations in this many
// rounds, alternating with the others, so slow drifts of a noisy machine hit all
// implementations alike.
constexpr int kRounds = 4;

// Host message buffers, in one of two kinds (--buffers). By default 2 MiB-aligned
// and asking for transparent huge pages, as the allocators of training frameworks do
// for large tensors: with 4 KiB pages, TLB misses (expensive under virtualisation)
// weigh on large messages, and first touches on the first call. `ordinary` measures
// that: malloc'd memory on 4 KiB pages (MADV_NOHUGEPAGE, so the system's THP mode
// cannot change it), not touched before the first call, as most applications have.
struct BufferFree {
  static constexpr std::size_t kHugePage = 2 << 20;
  bool ordinary = false;
  void operator()(std::byte* p) const {
    if (ordinary) {
      std::free(p);
    } else {
      ::operator delete[](p, std::align_val_t{kHugePage});
    }
  }
};
using Buffer = std::unique_ptr<std::byte[], BufferFree>;
Buffer make_buffer(std::size_t bytes, bool ordinary) {
  const std::size_t size = std::max<std::size_t>(bytes, 1);
  if (ordinary) {
    auto* p = static_cast<std::byte*>(std::malloc(size));
    if (p == nullptr) throw std::bad_alloc();
    // The whole pages inside the buffer (madvise takes page-aligned ranges).
    const std::size_t page = 4096;
    const auto begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(p) + size) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_NOHUGEPAGE);
    return Buffer(p, BufferFree{true});
  }
  Buffer b(static_cast<std::byte*>(::operator new[](size, std::align_val_t{BufferFree::kHugePage})),
           BufferFree{false});
  if (bytes >= BufferFree::kHugePage) ::madvise(b.get(), bytes, MADV_HUGEPAGE);
  std::memset(b.get(), 0, bytes);  // first touch outside the timed region
  return b;
}

// A pair from the node's shared heap, for the impls that run on it.
struct SharedPair {
  SharedPair(std::size_t bytes, const Communicator& comm)
      : send(allocate_shared(bytes, comm)), recv(allocate_shared(bytes, comm)) {
    if (bytes == 0) return;
    std::memset(send.data(), 0, bytes);  // first touch outside the timed region
    std::memset(recv.data(), 0, bytes);
  }
  SharedBuffer send;
  SharedBuffer recv;
};

// The message buffers every implementation runs on: host memory, or device
// memory with host copies the validator works on, and the moves between them;
// and, where `shared_comm` is given, a pair from its shared heap (host only).
// Not movable: the moves point at its members.
class MessageBuffers {
 public:
  MessageBuffers(const AllreduceOptions& o, const Communicator& comm, std::size_t max_count,
                 const Communicator* shared_comm)
      : esize_(size_of(o.dtype)),
        host_send_(make_buffer(max_count * esize_, o.ordinary_buffers)),
        host_recv_(make_buffer(max_count * esize_, o.ordinary_buffers)),
        send_(host_send_.get()),
        recv_(host_recv_.get()) {
    if (shared_comm != nullptr) {
      shared_.emplace(max_count * esize_, *shared_comm);
      if (comm.rank() == 0 && !shared_->send.shared()) {
        fmt::print(stderr,
                   "concord-bench: no shared heap here: *-shared impls run on ordinary "
                   "memory\n");
      }
    }
#if CONCORD_BENCH_NCCL
    if (o.device == Device::Cuda) {
      device_ = std::make_unique<DeviceBench>(comm);
      if (comm.rank() == 0) fmt::print("# Device: {}\n", device_->describe());
      send_ = device_->allocate(max_count * esize_);
      recv_ = device_->allocate(max_count * esize_);
    }
#else
    (void)comm;
    if (o.device == Device::Cuda) {
      throw std::invalid_argument(
          "--device cuda: this concord-bench was built without CUDA and NCCL");
    }
#endif
  }
  MessageBuffers(const MessageBuffers&) = delete;
  MessageBuffers& operator=(const MessageBuffers&) = delete;

  // `shared`: the pair from the shared heap instead.
  std::byte* send(bool shared = false) const {
    return shared ? static_cast<std::byte*>(shared_->send.data()) : send_;
  }
  std::byte* recv(bool shared = false) const {
    return shared ? static_cast<std::byte*>(shared_->recv.data()) : recv_;
  }
  std::byte* host_send(bool shared = false) const {
    return shared ? send(true) : host_send_.get();
  }
  const std::byte* host_recv(bool shared = false) const {
    return shared ? recv(true) : host_recv_.get();
  }
#if CONCORD_BENCH_NCCL
  DeviceBench* device() const {
    return device_.get();
  }
#endif

  // The first n elements of host_send() to send() (a no-op on host buffers).
  void upload_send(std::size_t n) {
#if CONCORD_BENCH_NCCL
    if (device_) device_->upload(send_, host_send_.get(), n * esize_);
#else
    (void)n;
#endif
  }
  // The first n elements of recv() to host_recv() (a no-op on host buffers).
  void download_recv(std::size_t n) {
#if CONCORD_BENCH_NCCL
    if (device_) device_->download(host_recv_.get(), recv_, n * esize_);
#else
    (void)n;
#endif
  }
  // A result that is never written shows as wrong: recv starts as 0xff bytes.
  void poison_recv(std::size_t n, bool shared = false) {
    if (shared) {
      std::memset(recv(true), 0xff, n * esize_);
      return;
    }
#if CONCORD_BENCH_NCCL
    if (device_) {
      std::memset(host_recv_.get(), 0xff, n * esize_);
      device_->upload(recv_, host_recv_.get(), n * esize_);
      return;
    }
#endif
    std::memset(recv_, 0xff, n * esize_);
  }

 private:
  std::size_t esize_;
  Buffer host_send_;
  Buffer host_recv_;
  std::byte* send_;
  std::byte* recv_;
  std::optional<SharedPair> shared_;
#if CONCORD_BENCH_NCCL
  std::unique_ptr<DeviceBench> device_;
#endif
};

// concord-shared's communicator (a duplicate of comm's, so that its path
// measurements are its own), where a -shared impl is asked for; checked before
// any buffer is made.
std::optional<Communicator> shared_communicator(const AllreduceOptions& o,
                                                const Communicator& comm) {
  if (!wants_shared(o)) return std::nullopt;
  if (o.device != Device::Cpu) {
    throw std::invalid_argument(
        "--impl concord-shared, mpi-shared and roofline-shared are host only");
  }
  return Communicator(comm.mpi_comm());
}

// One run of the benchmark: the buffers, the implementations and the validator,
// set up once; measure() times every implementation at one size.
class AllreduceRun {
 public:
  AllreduceRun(const AllreduceOptions& o, const Communicator& comm)
      : o_(o),
        comm_(comm),
        world_(comm.mpi_comm()),
        shared_comm_(shared_communicator(o, comm)),
        buffers_(o, comm, o.max_bytes / esize(), shared_comm_ ? &*shared_comm_ : nullptr) {
#if CONCORD_BENCH_NCCL
    if (o.device == Device::Cuda) impls_ = make_device_impls(o, comm, *buffers_.device());
#endif
    if (o.device == Device::Cpu) impls_ = make_impls(o, comm, shared_comm_ ? *shared_comm_ : comm);
    const std::size_t max_count = o.max_bytes / esize();
    if (o.validate) {
      validator_.emplace(o, comm.rank(), comm.size(), max_count);
    } else {
      // Any finite input: take the validation pattern's first values.
      Validator(o, comm.rank(), 1, max_count).fill(buffers_.host_send(), max_count);
      buffers_.upload_send(max_count);
      if (shared_comm_) {
        Validator(o, comm.rank(), 1, max_count).fill(buffers_.host_send(true), max_count);
      }
    }
    for (const Impl& impl : impls_) labels_.push_back(impl.name + ":" + impl.algorithm);
  }

  // Every implementation at `bytes`: the measurements (complete on rank 0).
  std::vector<Measurement> measure(std::size_t bytes, ShmPhaseSampler& phases);
  std::size_t impl_count() const {
    return impls_.size();
  }
  const std::vector<std::string>& labels() const {
    return labels_;
  }
  // What the records say of the device the run used (nothing on host buffers).
  nlohmann::json context() const {
#if CONCORD_BENCH_NCCL
    if (buffers_.device() != nullptr) return buffers_.device()->context();
#endif
    return nlohmann::json::object();
  }

 private:
  std::size_t esize() const {
    return size_of(o_.dtype);
  }
  void checked_call(std::size_t which, std::size_t count);
  std::vector<double> timed_rounds(std::size_t count, int iterations, ShmPhaseSampler& phases);
  Measurement summarize(std::size_t k, std::size_t bytes, double seconds, int iterations,
                        int warmup) const;

  const AllreduceOptions& o_;
  const Communicator& comm_;
  MPI_Comm world_;
  const std::optional<Communicator> shared_comm_;  // shared_communicator()
  MessageBuffers buffers_;
  std::vector<Impl> impls_;
  std::optional<Validator> validator_;
  std::vector<std::string> labels_;
  std::vector<int> valid_;  // per implementation, at the current size
};

// With -c, each implementation's result is checked in calls of its own, before
// and after the timed rounds, so that checking never changes what is timed: the
// timed loop is the same with or without -c.
void AllreduceRun::checked_call(std::size_t which, std::size_t count) {
  const Impl& impl = impls_[which];
  if (!impl.is_allreduce) return;
  const bool shared = impl.on_shared;
  validator_->fill(buffers_.host_send(shared), count);
  if (!shared) buffers_.upload_send(count);
  buffers_.poison_recv(count, shared);
  MPI_Barrier(world_);
  impl.run(buffers_.send(shared), buffers_.recv(shared), count);
  if (impl.sync) impl.sync();
  if (!shared) buffers_.download_recv(count);
  if (!validator_->check(buffers_.host_recv(shared), count)) valid_[which] = 0;
}

// kRounds barrier-aligned rounds, the implementations' order alternating from
// round to round. Returns the seconds each spent in its timed calls: as nccl-tests
// times them, the calls back to back and one synchronisation at the end, so a call
// that only queues its work is timed by when the work is done.
std::vector<double> AllreduceRun::timed_rounds(std::size_t count, int iterations,
                                               ShmPhaseSampler& phases) {
  std::vector<double> seconds(impls_.size(), 0.0);
  for (int round = 0; round < kRounds; ++round) {
    const int round_iters = iterations / kRounds + (round < iterations % kRounds ? 1 : 0);
    for (std::size_t k = 0; k < impls_.size(); ++k) {
      const std::size_t which = round % 2 == 0 ? k : impls_.size() - 1 - k;
      const Impl& impl = impls_[which];
      MPI_Barrier(world_);
      phases.begin();
      const double t0 = MPI_Wtime();
      std::byte* send = buffers_.send(impl.on_shared);
      std::byte* recv = buffers_.recv(impl.on_shared);
      for (int i = 0; i < round_iters; ++i) impl.run(send, recv, count);
      if (impl.sync) impl.sync();
      seconds[which] += MPI_Wtime() - t0;
      phases.end(which);
    }
  }
  return seconds;
}

// Implementation k's row: latency over ranks (OSU: mean, min and max of each
// rank's mean), bus bandwidth, and the validity every rank agrees on.
Measurement AllreduceRun::summarize(std::size_t k, std::size_t bytes, double seconds,
                                    int iterations, int warmup) const {
  const int p = comm_.size();
  double mean_us = seconds * 1e6 / iterations;
  double sum = 0, lo = 0, hi = 0;
  int all_valid = 0;
  MPI_Reduce(&mean_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, world_);
  MPI_Reduce(&mean_us, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, world_);
  MPI_Reduce(&mean_us, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, world_);
  // On every rank, which all exit with the same status.
  int mine = valid_[k];
  MPI_Allreduce(&mine, &all_valid, 1, MPI_INT, MPI_MIN, world_);
  Measurement m;
  m.impl = impls_[k].name;
  m.algorithm = impls_[k].algorithm;
  m.bytes = bytes;
  m.count = bytes / esize();
  m.avg_us = sum / p;
  m.min_us = lo;
  m.max_us = hi;
  m.iterations = iterations;
  m.warmup = warmup;
  m.busbw_gbps =
      p > 1 ? static_cast<double>(bytes) / (m.avg_us * 1e-6) * 2.0 * (p - 1) / p / 1e9 : 0.0;
  if (o_.validate && impls_[k].is_allreduce) m.validated = all_valid != 0;
  return m;
}

std::vector<Measurement> AllreduceRun::measure(std::size_t bytes, ShmPhaseSampler& phases) {
  const std::size_t count = bytes / esize();
  const int iterations = iterations_for(o_, bytes);
  const int warmup = warmup_for(o_, bytes);
  valid_.assign(impls_.size(), 1);
  for (std::size_t k = 0; k < impls_.size(); ++k) {
    if (validator_) checked_call(k, count);
    const bool shared = impls_[k].on_shared;
    for (int i = 0; i < warmup; ++i) {
      impls_[k].run(buffers_.send(shared), buffers_.recv(shared), count);
    }
    if (impls_[k].sync) impls_[k].sync();
  }
  const std::vector<double> seconds = timed_rounds(count, iterations, phases);
  // Checked again after the timed calls: state they left behind (caches,
  // arenas, scratch) must not change the next result.
  if (validator_) {
    for (std::size_t k = 0; k < impls_.size(); ++k) checked_call(k, count);
  }
  std::vector<Measurement> row;
  for (std::size_t k = 0; k < impls_.size(); ++k) {
    row.push_back(summarize(k, bytes, seconds[k], iterations, warmup));
  }
  return row;
}

}  // namespace

std::vector<Measurement> run_allreduce_bench(
    const AllreduceOptions& o, const Communicator& comm,
    const std::function<void(const std::vector<Measurement>&)>& on_size, nlohmann::json* context) {
  AllreduceRun run(o, comm);
  ShmPhaseSampler phases(run.impl_count());
  std::vector<Measurement> all;
  for (const std::size_t bytes : size_steps(o.min_bytes, o.max_bytes, size_of(o.dtype))) {
    std::vector<Measurement> row = run.measure(bytes, phases);
    if (comm.rank() == 0) on_size(row);
    if (ShmPhaseSampler::enabled()) {
      phases.report(comm.mpi_comm(), bytes, iterations_for(o, bytes), run.labels());
    }
    all.insert(all.end(), row.begin(), row.end());
  }
  if (context != nullptr) *context = run.context();
  return all;
}

}  // namespace concord::bench

#include "memcpy/memcpy_bench.hpp"

#include "common/bench_options.hpp"
#include "memcpy/peer_reader.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <thread>

namespace concord::bench {
namespace {

// OSU layout, as the allreduce table: sizes left-aligned in 10 columns, values in 18.
constexpr int kSizeWidth = 10;
constexpr int kFieldWidth = 18;
constexpr int kDefaultSamples = 15;
// Each timed sample repeats the call until it has moved this many bytes, so the
// clock's resolution (and, with --all-ranks, the barrier's skew) is small against it.
constexpr std::size_t kSampleBytes = std::size_t{4} << 20;

// Tells the compiler that memory may be read here, so repeated stores into the same
// destination are neither dropped nor merged (Google Benchmark's ClobberMemory).
inline void clobber_memory() {
  asm volatile("" : : : "memory");
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CONCORD_BENCH_AVX2_CLONE 1
#endif

// The reduce pass. concord's kernels (src/reduce) are not public API, so the bench
// has its own loop, which the compiler vectorises; like concord's table it also has
// an AVX2 version, picked at load time on CPUs that have it.
#ifdef CONCORD_BENCH_AVX2_CLONE
__attribute__((target_clones("avx2", "default")))
#endif
__attribute__((noinline)) void
add_float32(float* __restrict d, const float* __restrict a, const float* __restrict b,
            std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = a[i] + b[i];
}

std::string reduce_isa() {
#ifdef CONCORD_BENCH_AVX2_CLONE
  std::string isa = __builtin_cpu_supports("avx2") ? "avx2" : "x86-64 baseline";
#else
  std::string isa = "compiler default";
#endif
#ifndef __OPTIMIZE__
  isa += ", NOT vectorised: built without optimisation";
#endif
  return isa;
}

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{4096}); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;

// The value make_buffer(bytes, offset) puts at element i.
float pattern(float offset, std::size_t i) {
  return offset + static_cast<float>(i % 1009);
}

// Page-aligned, and every page written here, so page faults stay out of the timings.
Buffer make_buffer(std::size_t bytes, float offset) {
  Buffer b(static_cast<float*>(::operator new[](bytes, std::align_val_t{4096})));
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i) {
    b[i] = pattern(offset, i);  // small integers: sums are exact
  }
  return b;
}

template <class Call>
double seconds_per_call(const Call& call, int reps) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    call();
    clobber_memory();
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - t0;
  return elapsed.count() / reps;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void print_header(const MemcpyOptions& o, int samples, int rank_count) {
  fmt::print(
      "# concord-bench memcpy: one core's memory bandwidth by size, the roofline for "
      "allreduce\n");
  fmt::print(
      "# memcpy: std::memcpy; GB/s = size / time (bytes copied; memory traffic is 2x "
      "size)\n");
  fmt::print(
      "# reduce: d[i] = a[i] + b[i] over float32 in the bench's own loop ({}), not "
      "concord's kernels (not public API); GB/s = size / time (traffic 3x size)\n",
      reduce_isa());
  fmt::print(
      "# median of {} timed samples per size, each >= {} MiB of calls; buffers "
      "touched before timing; sizes that fit in cache measure the cache\n",
      samples, kSampleBytes >> 20);
  if (o.all_ranks) {
    fmt::print("# {} ranks measure at once, sample by sample; GB/s per rank, mean over ranks\n",
               rank_count);
  } else if (rank_count > 1) {
    fmt::print(
        "# rank 0 of {} measures alone while the others sleep (--all-ranks: all at "
        "once)\n",
        rank_count);
  }
  if (o.cma) {
    fmt::print(
        "# cma: process_vm_readv of the next rank's buffer into this rank's, as concord's "
        "single-copy path reads its peers; GB/s = size / time\n");
  }
  fmt::print("{:<{}}{:>{}}{:>{}}", "# Size", kSizeWidth, "memcpy(GB/s)", kFieldWidth,
             "reduce(GB/s)", kFieldWidth);
  if (o.cma) fmt::print("{:>{}}{:>{}}", "cma(GB/s)", kFieldWidth, "memcpy/cma", kFieldWidth);
  fmt::print("\n");
  std::fflush(stdout);
}

// One size's row: the kernels' bandwidths (memcpy, reduce[, cma]), and with
// --cma how many times faster memcpy was than the peer read.
void print_row(std::size_t bytes, const std::vector<double>& gbps, bool cma) {
  fmt::print("{:<{}}", bytes, kSizeWidth);
  for (const double g : gbps) fmt::print("{:>{}.2f}", g, kFieldWidth);
  if (cma) fmt::print("{:>{}.2f}", gbps[0] / gbps[2], kFieldWidth);
  fmt::print("\n");
  std::fflush(stdout);
}

void write_json(const std::string& path, const std::vector<Bandwidth>& all) {
  nlohmann::json records = nlohmann::json::array();
  for (const Bandwidth& b : all) {
    records.push_back({{"impl", b.impl},
                       {"bytes", b.bytes},
                       {"gbps", b.gbps},
                       {"iterations", b.iterations},
                       {"ranks", b.ranks}});
  }
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--json: cannot write " + path);
  out << records.dump(1) << "\n";
}

// One kernel of the table: a call on the bench's buffers, and whether the last
// call's output is what it should be.
struct Kernel {
  std::string name;
  std::function<void()> call;
  std::function<bool()> output_ok;
};

// x's pattern starts at x_offset(rank): each rank's differs, so that a read of
// the next rank's x is told apart from a read of one's own.
float x_offset(int rank) {
  return 1.0f + static_cast<float>(rank);
}

struct Buffers {
  Buffer x, y, z;  // z = x, z = x + y, z = the next rank's x
};

Buffers allocate(const MemcpyOptions& o, MPI_Comm comm, int rank, int rank_count) {
  Buffers b;
  int allocated = 1;
  try {
    b.x = make_buffer(o.max_bytes, x_offset(rank));
    b.y = make_buffer(o.max_bytes, 2.0f);
    b.z = make_buffer(o.max_bytes, 0.0f);
  } catch (const std::bad_alloc&) {
    allocated = 0;
  }
  // With --all-ranks, all fail alike rather than some waiting in a barrier for ever.
  if (o.all_ranks) MPI_Allreduce(MPI_IN_PLACE, &allocated, 1, MPI_INT, MPI_MIN, comm);
  if (!allocated) {
    throw std::runtime_error(fmt::format("memcpy: cannot allocate 3 buffers of {} bytes{}",
                                         o.max_bytes,
                                         o.all_ranks && rank_count > 1 ? " on every rank" : ""));
  }
  return b;
}

// The kernels at one size. With a reader, `next_rank` is the rank it reads and
// `cma_error` keeps the errno of a failed read; the kernels refer to it and to
// `b`, so both must outlive them.
std::vector<Kernel> kernels(Buffers& b, const PeerReader* reader, int next_rank, std::size_t bytes,
                            int& cma_error) {
  const std::size_t n = bytes / sizeof(float);
  std::vector<Kernel> table;
  table.push_back({"memcpy", [&b, bytes] { std::memcpy(b.z.get(), b.x.get(), bytes); },
                   [&b, bytes] { return std::memcmp(b.z.get(), b.x.get(), bytes) == 0; }});
  table.push_back({"reduce", [&b, n] { add_float32(b.z.get(), b.x.get(), b.y.get(), n); },
                   [&b, n] {
                     for (std::size_t i = 0; i < n; ++i) {
                       if (b.z[i] != b.x[i] + b.y[i]) return false;
                     }
                     return true;
                   }});
  if (reader != nullptr) {
    table.push_back({"cma",
                     [&b, reader, bytes, &cma_error] {
                       if (const int e = reader->read(b.z.get(), bytes); e != 0) cma_error = e;
                     },
                     [&b, n, next_rank] {
                       for (std::size_t i = 0; i < n; ++i) {
                         if (b.z[i] != pattern(x_offset(next_rank), i)) return false;
                       }
                       return true;
                     }});
  }
  return table;
}

// The measurement on this rank; with --all-ranks every rank runs it in step.
std::vector<Bandwidth> measure(const MemcpyOptions& o, MPI_Comm comm, int rank, int rank_count) {
  const int samples = o.iterations.value_or(kDefaultSamples);
  const int measuring = o.all_ranks ? rank_count : 1;
  Buffers buffers = allocate(o, comm, rank, rank_count);
  std::optional<PeerReader> reader;
  if (o.cma) reader.emplace(comm, buffers.x.get());
  auto sync = [&] {
    if (o.all_ranks) MPI_Barrier(comm);
  };
  if (rank == 0) print_header(o, samples, rank_count);

  std::vector<Bandwidth> all;
  for (const std::size_t bytes : size_steps(o.min_bytes, o.max_bytes, sizeof(float))) {
    const int reps = static_cast<int>(std::max<std::size_t>(1, kSampleBytes / bytes));
    int cma_error = 0;
    const std::vector<Kernel> table =
        kernels(buffers, reader ? &*reader : nullptr, (rank + 1) % rank_count, bytes, cma_error);
    // Warm-up: caches, TLB, clock frequency.
    for (const Kernel& kernel : table) seconds_per_call(kernel.call, reps);
    std::vector<std::vector<double>> seconds(table.size());
    for (int s = 0; s < samples; ++s) {
      for (std::size_t k = 0; k < table.size(); ++k) {
        sync();
        seconds[k].push_back(seconds_per_call(table[k].call, reps));
      }
    }
    // Use the results: each kernel once more, then its output checked.
    int ok = 1;
    for (const Kernel& kernel : table) {
      kernel.call();
      if (!kernel.output_ok()) ok = 0;
    }
    std::vector<double> gbps;
    for (const std::vector<double>& t : seconds) {
      gbps.push_back(static_cast<double>(bytes) / median(t) / 1e9);
    }
    if (o.all_ranks) {
      MPI_Allreduce(MPI_IN_PLACE, gbps.data(), static_cast<int>(gbps.size()), MPI_DOUBLE, MPI_SUM,
                    comm);
      for (double& g : gbps) g /= rank_count;
      MPI_Allreduce(MPI_IN_PLACE, &cma_error, 1, MPI_INT, MPI_MAX, comm);
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    }
    if (cma_error != 0) {
      throw std::runtime_error(fmt::format("memcpy --cma: process_vm_readv failed at {} bytes: {}",
                                           bytes, std::strerror(cma_error)));
    }
    if (!ok) throw std::runtime_error(fmt::format("memcpy: wrong result at {} bytes", bytes));
    for (std::size_t k = 0; k < table.size(); ++k) {
      all.push_back({table[k].name, bytes, gbps[k], samples, measuring});
    }
    if (rank == 0) print_row(bytes, gbps, o.cma);
  }
  if (rank == 0 && !o.json_path.empty()) write_json(o.json_path, all);
  return all;
}

}  // namespace

std::vector<Bandwidth> run_memcpy_bench(const MemcpyOptions& options, MPI_Comm comm) {
  int rank = 0;
  int rank_count = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &rank_count);
  // --cma reads the peers' buffers, so every rank takes part (and they measure in step).
  MemcpyOptions o = options;
  o.all_ranks = o.all_ranks || o.cma;
  if (o.all_ranks) return measure(o, comm, rank, rank_count);
  // Rank 0 measures alone. The others wait without spinning (MPICH's blocking calls
  // busy-poll a core), and rank 0 joins them whatever happened, so none is left waiting.
  std::vector<Bandwidth> all;
  std::exception_ptr error;
  if (rank == 0) {
    try {
      all = measure(o, comm, rank, rank_count);
    } catch (...) {
      error = std::current_exception();
    }
  }
  MPI_Request done = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm, &done);
  for (int finished = 0; !finished;) {
    MPI_Test(&done, &finished, MPI_STATUS_IGNORE);
    if (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (error) std::rethrow_exception(error);
  return all;
}

}  // namespace concord::bench

#include "kernels_bench.hpp"

#include "bench_options.hpp"
#include "fusion_bench.hpp"

#include <concord/types.hpp>

#include <fmt/format.h>
#include <mpi.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#if CONCORD_BENCH_CUDA
#include "cuda/cuda_runtime.hpp"
#include "reduce/cuda_kernels.hpp"
#include "reduce/reduce_kernels.hpp"

#include <cuda_runtime_api.h>
#endif

namespace concord::bench {
namespace {

// OSU layout, as the other tables: sizes left-aligned in 10 columns, values in 18.
constexpr int kSizeWidth = 10;
constexpr int kFieldWidth = 18;
// Each timed sample repeats the call until it has moved this many bytes (at most
// kMaxReps calls), so launch jitter and the events' resolution stay small against it.
constexpr std::size_t kSampleBytes = std::size_t{256} << 20;
constexpr int kMaxReps = 1000;

// The command line, checked: the same errors with or without CUDA.
struct Plan {
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  std::vector<DataType> dtypes;
  std::vector<ReduceOp> ops;
};

Plan check_args(const KernelsArgs& a) {
  Plan p;
  for (const std::string& name : split_list(a.dtypes)) p.dtypes.push_back(parse_data_type(name));
  for (const std::string& name : split_list(a.ops)) p.ops.push_back(parse_reduce_op(name));
  if (p.dtypes.empty() || p.ops.empty()) throw std::invalid_argument("-T and -o need a value");
  if (!a.model_path.empty()) {
    if (!is_floating_point(p.dtypes[0]) && a.factor != 1.0) {
      throw std::invalid_argument(fmt::format("--factor {} needs a floating-point -T, not {}",
                                              a.factor, to_string(p.dtypes[0])));
    }
    return p;
  }
  std::tie(p.min_bytes, p.max_bytes) = parse_size_range(a.sizes);
  for (DataType d : p.dtypes) {
    size_steps(p.min_bytes, p.max_bytes, size_of(d));  // checks -m for every dtype
    for (ReduceOp op : p.ops) {
      if (!is_supported(d, op)) {
        throw std::invalid_argument(
            fmt::format("-o {} is not defined for -T {}", to_string(op), to_string(d)));
      }
    }
  }
  return p;
}

#if CONCORD_BENCH_CUDA

namespace cuda = concord::detail::cuda;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Median seconds per call of `a` and of `b` (each enqueues work on `stream`; its
// argument is the call's index within a sample), over `samples` samples of `reps_a`
// and `reps_b` calls, timed by events around each sample. The samples alternate
// (a b, b a, a b, ...) so that clock or thermal drift during the run falls on both.
template <class CallA, class CallB>
std::pair<double, double> interleaved_medians(cudaStream_t stream, const CallA& a, int reps_a,
                                              const CallB& b, int reps_b, int samples, int warmup) {
  for (int i = 0; i < warmup; ++i) {
    a(i);
    b(i);
  }
  cuda::Event start(true);
  cuda::Event stop(true);
  const auto sample = [&](const auto& call, int reps) {
    start.record(stream);
    for (int r = 0; r < reps; ++r) call(r);
    stop.record(stream);
    stop.synchronize();
    float ms = 0;
    cuda::check(cudaEventElapsedTime(&ms, start.get(), stop.get()), "cudaEventElapsedTime");
    return static_cast<double>(ms) * 1e-3 / reps;
  };
  std::vector<double> per_call_a, per_call_b;
  for (int s = 0; s < samples; ++s) {
    if (s % 2 == 0) {
      per_call_a.push_back(sample(a, reps_a));
      per_call_b.push_back(sample(b, reps_b));
    } else {
      per_call_b.push_back(sample(b, reps_b));
      per_call_a.push_back(sample(a, reps_a));
    }
  }
  return {median(per_call_a), median(per_call_b)};
}

std::size_t l2_cache_bytes() {
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return static_cast<std::size_t>(std::max(prop.l2CacheSize, 0));
}

int reps_for(std::size_t traffic_bytes) {
  return static_cast<int>(
      std::clamp<std::size_t>(kSampleBytes / std::max<std::size_t>(traffic_bytes, 1), 1, kMaxReps));
}

// `count` elements of finite values (no NaN, no inf), so every result compares bit
// for bit with the host without arguing about NaN payloads.
std::vector<std::byte> random_elements(DataType d, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(count * size_of(d));
  std::byte* p = out.data();
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t r = rng();
    switch (d) {
      case DataType::Float16:
      case DataType::BFloat16: {
        const std::uint16_t inf = d == DataType::Float16 ? 0x7c00 : 0x7f80;
        auto v = static_cast<std::uint16_t>(r);
        if ((v & inf) == inf) v ^= 0x4000;  // inf/NaN exponent: make it finite
        std::memcpy(p + 2 * i, &v, 2);
        break;
      }
      case DataType::Float32: {
        const auto v = static_cast<float>((static_cast<double>(r >> 11) * 0x1p-53 - 0.5) * 2000.0);
        std::memcpy(p + 4 * i, &v, 4);
        break;
      }
      case DataType::Float64: {
        const double v = (static_cast<double>(r >> 11) * 0x1p-53 - 0.5) * 2000.0;
        std::memcpy(p + 8 * i, &v, 8);
        break;
      }
      default:
        std::memcpy(p + i * size_of(d), &r, size_of(d));
    }
  }
  return out;
}

void upload(void* dst, const std::vector<std::byte>& src) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  // Returns before the data lands (pageable source, legacy stream): the kernels'
  // non-blocking stream must not start before it has.
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
// Fills `bytes` of device memory with copies of `src`, one after another.
void upload_tiled(std::byte* dst, std::size_t bytes, const std::vector<std::byte>& src) {
  for (std::size_t at = 0; at < bytes; at += src.size()) {
    cuda::check(
        cudaMemcpy(dst + at, src.data(), std::min(src.size(), bytes - at), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  }
  cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
std::vector<std::byte> download(const void* src, std::size_t bytes) {
  std::vector<std::byte> out(bytes);
  cuda::check(cudaMemcpy(out.data(), src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return out;
}

std::string device_description() {
  int device = 0;
  cuda::check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return fmt::format("GPU {} ({}, {} SMs)", device, prop.name, prop.multiProcessorCount);
}

void write_json(const std::string& path, const nlohmann::json& records) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("--json: cannot write " + path);
  out << records.dump(1) << "\n";
}

// (a) reduce vs cudaMemcpyAsync by size. Returns false when a result was wrong.
//
// The calls of a sample rotate through buffer sets spread over more than twice
// the L2 cache, so that from about 100 KiB up both sides stream from device
// memory, the regime the >= 0.9 target is about: with one set, mid sizes would
// compare L2 hits (reduce touches 3 x size, copy 2 x size, so they leave L2 at
// different sizes) rather than the kernels.
bool run_reduce(const KernelsArgs& a, const Plan& p, nlohmann::json& records) {
  cuda::Stream stream;
  const std::size_t room = p.max_bytes + (a.offset + 1) * 8;
  const std::size_t l2 = l2_cache_bytes();
  constexpr std::size_t kSetAlign = 256;
  const std::size_t pool = room + 2 * l2 + kSetAlign;
  cuda::DeviceBuffer da(pool), db(pool), dd(pool);
  fmt::print(
      "# concord-bench kernels: dst = a op b (concord::detail::cuda::reduce) vs "
      "cudaMemcpyAsync device to device, on {}\n",
      device_description());
  fmt::print(
      "# reduce GB/s = 3 x size / time (reads a and b, writes dst); memcpy GB/s = 2 x "
      "size / time; ratio = reduce GB/s / memcpy GB/s (target >= 0.90 where the "
      "working set is DRAM)\n");
  fmt::print(
      "# median of {} samples, reduce and memcpy alternating, each sample min({} calls, "
      ">= {} MiB of traffic), CUDA events on one stream; calls rotate through buffer "
      "sets over 2 x L2 ({} MiB); working set = the sets a sample touches (L2 if it "
      "fits in L2); pointers offset by {} element(s); every result checked against "
      "the host\n",
      a.iterations, kMaxReps, kSampleBytes >> 20, l2 >> 20, a.offset);
  bool all_ok = true;
  for (DataType d : p.dtypes) {
    const std::size_t esize = size_of(d);
    const std::size_t max_count = p.max_bytes / esize + a.offset;
    const std::vector<std::byte> ha = random_elements(d, max_count, 1);
    const std::vector<std::byte> hb = random_elements(d, max_count, 2);
    upload_tiled(da.get(), pool, ha);
    upload_tiled(db.get(), pool, hb);
    std::byte* pa = da.get() + a.offset * esize;
    std::byte* pb = db.get() + a.offset * esize;
    std::byte* pd = dd.get() + a.offset * esize;
    for (ReduceOp op : p.ops) {
      fmt::print("# {} {}\n", to_string(d), to_string(op));
      fmt::print("{:<{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "# Size", kSizeWidth,
                 "reduce(GB/s)", kFieldWidth, "memcpy(GB/s)", kFieldWidth, "ratio", kFieldWidth,
                 "reduce(us)", kFieldWidth, "memcpy(us)", kFieldWidth, "working set", kFieldWidth,
                 "check", kFieldWidth);
      for (const std::size_t bytes : size_steps(p.min_bytes, p.max_bytes, esize)) {
        const std::size_t n = bytes / esize;
        // Check once, before timing (set 0 holds the host's data at the start).
        cuda::reduce(pd, pa, pb, n, d, op, stream.get());
        stream.synchronize();
        const std::vector<std::byte> got = download(pd, bytes);
        std::vector<std::byte> want(bytes);
        concord::detail::reduce_kernel(d, op)(want.data(), ha.data() + a.offset * esize,
                                              hb.data() + a.offset * esize, n);
        const bool ok = std::memcmp(got.data(), want.data(), bytes) == 0;
        all_ok = all_ok && ok;

        const std::size_t stride =
            (bytes + a.offset * esize + kSetAlign - 1) / kSetAlign * kSetAlign;
        const std::size_t sets =
            std::clamp<std::size_t>((2 * l2 + stride - 1) / stride, 1, kMaxReps);
        const int reps_reduce = reps_for(3 * bytes);
        const int reps_copy = reps_for(2 * bytes);
        const std::size_t working_set =
            std::min<std::size_t>(sets, static_cast<std::size_t>(reps_reduce)) * 3 * bytes;
        const char* where = working_set <= l2 ? "L2" : "DRAM";
        const auto reduce_call = [&](int r) {
          const std::size_t at = static_cast<std::size_t>(r) % sets * stride;
          cuda::reduce(pd + at, pa + at, pb + at, n, d, op, stream.get());
        };
        const auto copy_call = [&](int r) {
          const std::size_t at = static_cast<std::size_t>(r) % sets * stride;
          cuda::check(
              cudaMemcpyAsync(pd + at, pa + at, bytes, cudaMemcpyDeviceToDevice, stream.get()),
              "cudaMemcpyAsync");
        };
        const auto [t_reduce, t_copy] = interleaved_medians(
            stream.get(), reduce_call, reps_reduce, copy_call, reps_copy, a.iterations, a.warmup);
        const double reduce_gbps = 3.0 * static_cast<double>(bytes) / t_reduce / 1e9;
        const double copy_gbps = 2.0 * static_cast<double>(bytes) / t_copy / 1e9;
        const double ratio = reduce_gbps / copy_gbps;
        fmt::print("{:<{}}{:>{}.2f}{:>{}.2f}{:>{}.3f}{:>{}.2f}{:>{}.2f}{:>{}}{:>{}}\n", bytes,
                   kSizeWidth, reduce_gbps, kFieldWidth, copy_gbps, kFieldWidth, ratio, kFieldWidth,
                   t_reduce * 1e6, kFieldWidth, t_copy * 1e6, kFieldWidth, where, kFieldWidth,
                   ok ? "Pass" : "FAIL", kFieldWidth);
        std::fflush(stdout);
        const nlohmann::json common = {{"dtype", std::string(to_string(d))},
                                       {"op", std::string(to_string(op))},
                                       {"bytes", bytes},
                                       {"count", n},
                                       {"offset_elements", a.offset},
                                       {"iterations", a.iterations},
                                       {"buffer_sets", sets},
                                       {"working_set", where}};
        nlohmann::json r = common;
        r.update({{"impl", "reduce"},
                  {"time_us", t_reduce * 1e6},
                  {"traffic_bytes", 3 * bytes},
                  {"gbps", reduce_gbps},
                  {"ratio_to_memcpy", ratio},
                  {"validated", ok}});
        records.push_back(r);
        nlohmann::json c = common;
        c.update({{"impl", "memcpy"},
                  {"time_us", t_copy * 1e6},
                  {"traffic_bytes", 2 * bytes},
                  {"gbps", copy_gbps},
                  {"validated", nullptr}});
        records.push_back(c);
      }
    }
  }
  return all_ok;
}

// (b) a model's gradients packed into one fusion buffer and back: batched_copy vs
// one cudaMemcpyAsync per tensor.
bool run_model(const KernelsArgs& a, const Plan& p, nlohmann::json& records) {
  const Model model = load_model(a.model_path);
  const DataType d = p.dtypes[0];
  const std::size_t esize = size_of(d);
  // Tensors each at a 256-byte boundary, as cudaMalloc and the frameworks' caching
  // allocators place them; the fusion buffer holds them back to back, as the engine's.
  constexpr std::size_t kTensorAlign = 256;
  std::vector<std::size_t> tensor_at, fused_at;
  std::size_t tensor_bytes = 0;
  std::size_t fused_bytes = 0;
  for (const ModelTensor& t : model.tensors) {
    tensor_at.push_back(tensor_bytes);
    fused_at.push_back(fused_bytes);
    tensor_bytes += (t.elements * esize + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    fused_bytes += t.elements * esize;
  }
  cuda::Stream stream;
  cuda::DeviceBuffer tensors(tensor_bytes), unpacked(tensor_bytes), fused(fused_bytes);
  const std::vector<std::byte> host = random_elements(d, tensor_bytes / esize, 3);
  upload(tensors.get(), host);

  std::vector<cuda::CopyItem> pack_items, unpack_items;
  for (std::size_t t = 0; t < model.tensors.size(); ++t) {
    const std::size_t n = model.tensors[t].elements;
    pack_items.push_back({tensors.get() + tensor_at[t], fused.get() + fused_at[t], n, 1.0});
    unpack_items.push_back({fused.get() + fused_at[t], unpacked.get() + tensor_at[t], n, a.factor});
  }
  const auto pack_batched = [&] { cuda::batched_copy(pack_items, d, stream.get()); };
  const auto unpack_batched = [&] { cuda::batched_copy(unpack_items, d, stream.get()); };
  const auto per_tensor = [&](const std::vector<cuda::CopyItem>& items) {
    return [&items, &stream, esize] {
      for (const cuda::CopyItem& it : items) {
        cuda::check(cudaMemcpyAsync(it.dst, it.src, it.count * esize, cudaMemcpyDeviceToDevice,
                                    stream.get()),
                    "cudaMemcpyAsync");
      }
    };
  };
  const auto pack_memcpy = per_tensor(pack_items);
  const auto unpack_memcpy = per_tensor(unpack_items);

  // Check once: the fusion buffer is the tensors back to back; unpacking gives the
  // tensors back (scaled as the host's scale() does).
  pack_batched();
  unpack_batched();
  stream.synchronize();
  const std::vector<std::byte> got_fused = download(fused.get(), fused_bytes);
  const std::vector<std::byte> got_unpacked = download(unpacked.get(), tensor_bytes);
  bool pack_ok = true;
  bool unpack_ok = true;
  for (std::size_t t = 0; t < model.tensors.size(); ++t) {
    const std::size_t bytes = model.tensors[t].elements * esize;
    std::vector<std::byte> want(host.begin() + static_cast<std::ptrdiff_t>(tensor_at[t]),
                                host.begin() + static_cast<std::ptrdiff_t>(tensor_at[t] + bytes));
    pack_ok = pack_ok && std::memcmp(got_fused.data() + fused_at[t], want.data(), bytes) == 0;
    if (a.factor != 1.0)
      concord::detail::scale(want.data(), model.tensors[t].elements, d, a.factor);
    unpack_ok =
        unpack_ok && std::memcmp(got_unpacked.data() + tensor_at[t], want.data(), bytes) == 0;
  }

  const int reps = reps_for(2 * fused_bytes);
  struct Row {
    const char* direction;
    double batched_s, memcpy_s;
    bool ok;
  };
  const auto timed = [&](const auto& batched, const auto& memcpy_per_tensor) {
    return interleaved_medians(
        stream.get(), [&](int) { batched(); }, reps, [&](int) { memcpy_per_tensor(); }, reps,
        a.iterations, a.warmup);
  };
  const auto [pack_batched_s, pack_memcpy_s] = timed(pack_batched, pack_memcpy);
  const auto [unpack_batched_s, unpack_memcpy_s] = timed(unpack_batched, unpack_memcpy);
  const Row rows[] = {
      {"pack", pack_batched_s, pack_memcpy_s, pack_ok},
      {"unpack", unpack_batched_s, unpack_memcpy_s, unpack_ok},
  };
  fmt::print(
      "# concord-bench kernels --model {}: {} tensors, {} {} elements ({} bytes), into one "
      "fusion buffer and back, on {}\n",
      model.path, model.tensors.size(), model.elements, to_string(d), fused_bytes,
      device_description());
  fmt::print(
      "# batched_copy: one launch each way (factor {} on unpack); memcpy: one "
      "cudaMemcpyAsync per tensor (unscaled); GB/s = 2 x bytes / time; speedup = "
      "memcpy time / batched time\n",
      a.factor);
  fmt::print(
      "# median of {} samples of {} round(s) each, batched and memcpy alternating, CUDA "
      "events on one stream\n",
      a.iterations, reps);
  fmt::print("{:<{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "# Step", kSizeWidth, "batched(us)",
             kFieldWidth, "memcpy(us)", kFieldWidth, "speedup", kFieldWidth, "batched(GB/s)",
             kFieldWidth, "memcpy(GB/s)", kFieldWidth, "check", kFieldWidth);
  const double traffic = 2.0 * static_cast<double>(fused_bytes);
  for (const Row& r : rows) {
    fmt::print("{:<{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}}\n", r.direction,
               kSizeWidth, r.batched_s * 1e6, kFieldWidth, r.memcpy_s * 1e6, kFieldWidth,
               r.memcpy_s / r.batched_s, kFieldWidth, traffic / r.batched_s / 1e9, kFieldWidth,
               traffic / r.memcpy_s / 1e9, kFieldWidth, r.ok ? "Pass" : "FAIL", kFieldWidth);
    const nlohmann::json common = {{"model", model.path},
                                   {"tensors", model.tensors.size()},
                                   {"dtype", std::string(to_string(d))},
                                   {"direction", r.direction},
                                   {"bytes", fused_bytes},
                                   {"count", model.elements},
                                   {"iterations", a.iterations}};
    nlohmann::json b = common;
    b.update({{"impl", "batched_copy"},
              {"factor", std::string(r.direction) == "unpack" ? a.factor : 1.0},
              {"time_us", r.batched_s * 1e6},
              {"gbps", traffic / r.batched_s / 1e9},
              {"speedup_vs_memcpy", r.memcpy_s / r.batched_s},
              {"validated", r.ok}});
    records.push_back(b);
    nlohmann::json m = common;
    m.update({{"impl", "memcpy_per_tensor"},
              {"time_us", r.memcpy_s * 1e6},
              {"gbps", traffic / r.memcpy_s / 1e9},
              {"validated", nullptr}});
    records.push_back(m);
  }
  std::fflush(stdout);
  return pack_ok && unpack_ok;
}

int measure(const KernelsArgs& a, const Plan& p) {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    throw std::runtime_error("kernels: no CUDA device (" + why + ")");
  }
  nlohmann::json records = nlohmann::json::array();
  const bool ok = a.model_path.empty() ? run_reduce(a, p, records) : run_model(a, p, records);
  if (!a.json_path.empty()) write_json(a.json_path, records);
  if (!ok) {
    fmt::print(stderr, "concord-bench: validation FAILED\n");
    return 3;
  }
  return 0;
}

#endif  // CONCORD_BENCH_CUDA

}  // namespace

CLI::App* add_kernels_command(CLI::App& app, KernelsArgs& a) {
  CLI::App* k = app.add_subcommand(
      "kernels",
      "concord's CUDA kernels on one GPU: reduce bandwidth vs cudaMemcpyAsync by size, or "
      "(--model) packing a model's gradients with batched_copy vs one memcpy per tensor");
  k->add_option("-m,--message-size", a.sizes, "MIN:MAX bytes, doubling (K, M, G suffixes)")
      ->capture_default_str();
  k->add_option("-T,--type", a.dtypes,
                "Comma list: int8, uint8, int32, int64, float16, bfloat16, float32, float64 "
                "(--model: the first)")
      ->capture_default_str();
  k->add_option("-o,--op", a.ops, "Comma list: sum, prod, min, max, avg")->capture_default_str();
  k->add_option("-i,--iterations", a.iterations, "Timed samples per measurement (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, INT_MAX));
  k->add_option("-x,--warmup", a.warmup, "Untimed calls before each measurement")
      ->capture_default_str()
      ->check(CLI::Range(0, INT_MAX));
  k->add_option("--offset", a.offset,
                "Elements added to every reduce pointer (1: not 16-byte aligned)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  k->add_option("--model", a.model_path,
                "Model file (name<TAB>shape<TAB>elements per line): time packing its gradients "
                "into one fusion buffer and back instead of reduce");
  k->add_option("--factor", a.factor, "--model: scale factor applied while unpacking")
      ->capture_default_str();
  k->add_option("--json", a.json_path, "Also write one JSON record per measurement here");
  return k;
}

int run_kernels_command(KernelsArgs& a) {
  const Plan plan = check_args(a);
#if CONCORD_BENCH_CUDA
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Rank 0 measures alone; the others wait without spinning, and rank 0 joins them
  // whatever happened, so none is left waiting.
  int status = 0;
  std::exception_ptr error;
  if (rank == 0) {
    try {
      status = measure(a, plan);
    } catch (...) {
      error = std::current_exception();
    }
  }
  MPI_Request done = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &done);
  for (int finished = 0; !finished;) {
    MPI_Test(&done, &finished, MPI_STATUS_IGNORE);
    if (!finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (error) std::rethrow_exception(error);
  return status;
#else
  (void)plan;
  throw std::runtime_error(
      "kernels: this concord-bench was built without CUDA (configure on a machine with nvcc, "
      "CONCORD_WITH_CUDA=ON)");
#endif
}

}  // namespace concord::bench

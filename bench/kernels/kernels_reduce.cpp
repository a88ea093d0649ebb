// `concord-bench kernels` (a): dst = a op b (concord::detail::cuda::reduce) against
// cudaMemcpyAsync device to device, by size, dtype and op.
//
// The calls of a sample rotate through buffer sets spread over more than twice
// the L2 cache, so that from about 100 KiB up both sides stream from device
// memory, the regime the >= 0.9 target is about: with one set, mid sizes would
// compare L2 hits (reduce touches 3 x size, copy 2 x size, so they leave L2 at
// different sizes) rather than the kernels.
#include "kernels/kernels_gpu.hpp"

#include "common/bench_options.hpp"

#include "reduce/cuda_kernels.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

namespace concord::bench::gpu_kernels {
namespace {

constexpr std::size_t kSetAlign = 256;  // each buffer set starts at this boundary

// One dtype's operands: the host's copies (the reference's inputs, from element
// 0) and the device pointers, `offset` elements in.
struct Operands {
  std::vector<std::byte> host_a, host_b;
  std::byte* a = nullptr;
  std::byte* b = nullptr;
  std::byte* dst = nullptr;
};

// One size's measurement, a row of the table and two JSON records.
struct ReduceRow {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::size_t sets = 0;  // buffer sets the calls rotate through
  const char* working_set = "";
  double reduce_s = 0;
  double copy_s = 0;
  bool ok = false;
};

void print_preamble(const KernelsArgs& a, std::size_t l2) {
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
}

void print_columns(DataType d, ReduceOp op) {
  fmt::print("# {} {}\n", to_string(d), to_string(op));
  fmt::print("{:<{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}{:>{}}\n", "# Size", kSizeWidth,
             "reduce(GB/s)", kFieldWidth, "memcpy(GB/s)", kFieldWidth, "ratio", kFieldWidth,
             "reduce(us)", kFieldWidth, "memcpy(us)", kFieldWidth, "working set", kFieldWidth,
             "check", kFieldWidth);
}

// Once, before timing (set 0 holds the host's data at the start): the device's
// result bit for bit against the host table's.
bool check_once(const Operands& o, std::size_t offset, DataType d, ReduceOp op, std::size_t bytes,
                cuda::Stream& stream) {
  const std::size_t esize = size_of(d);
  const std::size_t n = bytes / esize;
  cuda::reduce(o.dst, o.a, o.b, n, d, op, stream.get());
  stream.synchronize();
  const std::vector<std::byte> got = download(o.dst, bytes);
  std::vector<std::byte> want(bytes);
  concord::detail::reduce_kernel(d, op)(want.data(), o.host_a.data() + offset * esize,
                                        o.host_b.data() + offset * esize, n);
  return std::memcmp(got.data(), want.data(), bytes) == 0;
}

// Times reduce and memcpy of row.bytes, interleaved, rotating through buffer sets.
void time_row(const KernelsArgs& a, const Operands& o, DataType d, ReduceOp op, std::size_t l2,
              cuda::Stream& stream, ReduceRow& row) {
  const std::size_t esize = size_of(d);
  const std::size_t bytes = row.bytes;
  const std::size_t n = row.count;
  const std::size_t stride = (bytes + a.offset * esize + kSetAlign - 1) / kSetAlign * kSetAlign;
  const std::size_t sets = std::clamp<std::size_t>((2 * l2 + stride - 1) / stride, 1, kMaxReps);
  const int reps_reduce = reps_for(3 * bytes);
  const int reps_copy = reps_for(2 * bytes);
  const std::size_t working_set =
      std::min<std::size_t>(sets, static_cast<std::size_t>(reps_reduce)) * 3 * bytes;
  row.sets = sets;
  row.working_set = working_set <= l2 ? "L2" : "DRAM";
  const auto reduce_call = [&](int r) {
    const std::size_t at = static_cast<std::size_t>(r) % sets * stride;
    cuda::reduce(o.dst + at, o.a + at, o.b + at, n, d, op, stream.get());
  };
  const auto copy_call = [&](int r) {
    const std::size_t at = static_cast<std::size_t>(r) % sets * stride;
    cuda::check(
        cudaMemcpyAsync(o.dst + at, o.a + at, bytes, cudaMemcpyDeviceToDevice, stream.get()),
        "cudaMemcpyAsync");
  };
  std::tie(row.reduce_s, row.copy_s) = interleaved_medians(
      stream.get(), reduce_call, reps_reduce, copy_call, reps_copy, a.iterations, a.warmup);
}

void report_row(const KernelsArgs& a, DataType d, ReduceOp op, const ReduceRow& row,
                nlohmann::json& records) {
  const std::size_t bytes = row.bytes;
  const double reduce_gbps = 3.0 * static_cast<double>(bytes) / row.reduce_s / 1e9;
  const double copy_gbps = 2.0 * static_cast<double>(bytes) / row.copy_s / 1e9;
  const double ratio = reduce_gbps / copy_gbps;
  fmt::print("{:<{}}{:>{}.2f}{:>{}.2f}{:>{}.3f}{:>{}.2f}{:>{}.2f}{:>{}}{:>{}}\n", bytes, kSizeWidth,
             reduce_gbps, kFieldWidth, copy_gbps, kFieldWidth, ratio, kFieldWidth,
             row.reduce_s * 1e6, kFieldWidth, row.copy_s * 1e6, kFieldWidth, row.working_set,
             kFieldWidth, row.ok ? "Pass" : "FAIL", kFieldWidth);
  std::fflush(stdout);
  const nlohmann::json common = {{"dtype", std::string(to_string(d))},
                                 {"op", std::string(to_string(op))},
                                 {"bytes", bytes},
                                 {"count", row.count},
                                 {"offset_elements", a.offset},
                                 {"iterations", a.iterations},
                                 {"buffer_sets", row.sets},
                                 {"working_set", row.working_set}};
  nlohmann::json r = common;
  r.update({{"impl", "reduce"},
            {"time_us", row.reduce_s * 1e6},
            {"traffic_bytes", 3 * bytes},
            {"gbps", reduce_gbps},
            {"ratio_to_memcpy", ratio},
            {"validated", row.ok}});
  records.push_back(r);
  nlohmann::json c = common;
  c.update({{"impl", "memcpy"},
            {"time_us", row.copy_s * 1e6},
            {"traffic_bytes", 2 * bytes},
            {"gbps", copy_gbps},
            {"validated", nullptr}});
  records.push_back(c);
}

}  // namespace

bool run_reduce(const KernelsArgs& a, const KernelsPlan& p, nlohmann::json& records) {
  cuda::Stream stream;
  const std::size_t room = p.max_bytes + (a.offset + 1) * 8;
  const std::size_t l2 = l2_cache_bytes();
  const std::size_t pool = room + 2 * l2 + kSetAlign;
  cuda::DeviceBuffer da(pool), db(pool), dd(pool);
  print_preamble(a, l2);
  bool all_ok = true;
  for (DataType d : p.dtypes) {
    const std::size_t esize = size_of(d);
    const std::size_t max_count = p.max_bytes / esize + a.offset;
    Operands o{random_elements(d, max_count, 1), random_elements(d, max_count, 2),
               da.get() + a.offset * esize, db.get() + a.offset * esize,
               dd.get() + a.offset * esize};
    upload_tiled(da.get(), pool, o.host_a);
    upload_tiled(db.get(), pool, o.host_b);
    for (ReduceOp op : p.ops) {
      print_columns(d, op);
      for (const std::size_t bytes : size_steps(p.min_bytes, p.max_bytes, esize)) {
        ReduceRow row;
        row.bytes = bytes;
        row.count = bytes / esize;
        row.ok = check_once(o, a.offset, d, op, bytes, stream);
        all_ok = all_ok && row.ok;
        time_row(a, o, d, op, l2, stream, row);
        report_row(a, d, op, row, records);
      }
    }
  }
  return all_ok;
}

}  // namespace concord::bench::gpu_kernels

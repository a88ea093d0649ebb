// `concord-bench kernels --model` (b): a model's gradients packed into one fusion
// buffer and back, batched_copy (one launch each way) against one
// cudaMemcpyAsync per tensor.
#include "kernels/kernels_gpu.hpp"

#include "fusion/fusion_bench.hpp"

#include "reduce/cuda_kernels.hpp"
#include "reduce/reduce_kernels.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>

namespace concord::bench::gpu_kernels {
namespace {

// Where each tensor lies: at a 256-byte boundary in `tensors`, as cudaMalloc and
// the frameworks' caching allocators place them; back to back in the fusion
// buffer, as the engine's.
struct Layout {
  static constexpr std::size_t kTensorAlign = 256;
  std::vector<std::size_t> tensor_at, fused_at;  // byte offsets
  std::size_t tensor_bytes = 0;
  std::size_t fused_bytes = 0;

  Layout(const Model& model, std::size_t esize) {
    for (const ModelTensor& t : model.tensors) {
      tensor_at.push_back(tensor_bytes);
      fused_at.push_back(fused_bytes);
      tensor_bytes += (t.elements * esize + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
      fused_bytes += t.elements * esize;
    }
  }
};

// The device memory and the copies both ways, as batched_copy items.
struct Buffers {
  cuda::DeviceBuffer tensors, unpacked, fused;
  std::vector<cuda::CopyItem> pack_items, unpack_items;

  Buffers(const Model& model, const Layout& l, double factor)
      : tensors(l.tensor_bytes), unpacked(l.tensor_bytes), fused(l.fused_bytes) {
    for (std::size_t t = 0; t < model.tensors.size(); ++t) {
      const std::size_t n = model.tensors[t].elements;
      pack_items.push_back({tensors.get() + l.tensor_at[t], fused.get() + l.fused_at[t], n, 1.0});
      unpack_items.push_back(
          {fused.get() + l.fused_at[t], unpacked.get() + l.tensor_at[t], n, factor});
    }
  }
};

struct Row {
  const char* direction;
  double batched_s, memcpy_s;
  bool ok;
};

// Checks once, after one pack and unpack: the fusion buffer is the tensors back
// to back; unpacking gives the tensors back (scaled as the host's scale() does).
// Returns {pack ok, unpack ok}.
std::pair<bool, bool> check_once(const Model& model, const Layout& l, const Buffers& b,
                                 const std::vector<std::byte>& host, DataType d, double factor) {
  const std::size_t esize = size_of(d);
  const std::vector<std::byte> got_fused = download(b.fused.get(), l.fused_bytes);
  const std::vector<std::byte> got_unpacked = download(b.unpacked.get(), l.tensor_bytes);
  bool pack_ok = true;
  bool unpack_ok = true;
  for (std::size_t t = 0; t < model.tensors.size(); ++t) {
    const std::size_t bytes = model.tensors[t].elements * esize;
    std::vector<std::byte> want(host.begin() + static_cast<std::ptrdiff_t>(l.tensor_at[t]),
                                host.begin() + static_cast<std::ptrdiff_t>(l.tensor_at[t] + bytes));
    pack_ok = pack_ok && std::memcmp(got_fused.data() + l.fused_at[t], want.data(), bytes) == 0;
    if (factor != 1.0) concord::detail::scale(want.data(), model.tensors[t].elements, d, factor);
    unpack_ok =
        unpack_ok && std::memcmp(got_unpacked.data() + l.tensor_at[t], want.data(), bytes) == 0;
  }
  return {pack_ok, unpack_ok};
}

void print_table_head(const KernelsArgs& a, const Model& model, DataType d, std::size_t fused_bytes,
                      int reps) {
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
}

void report_row(const KernelsArgs& a, const Model& model, DataType d, std::size_t fused_bytes,
                const Row& r, nlohmann::json& records) {
  const double traffic = 2.0 * static_cast<double>(fused_bytes);
  fmt::print("{:<{}}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}.2f}{:>{}}\n", r.direction, kSizeWidth,
             r.batched_s * 1e6, kFieldWidth, r.memcpy_s * 1e6, kFieldWidth,
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

}  // namespace

bool run_model(const KernelsArgs& a, const KernelsPlan& p, nlohmann::json& records) {
  const Model model = load_model(a.model_path);
  const DataType d = p.dtypes[0];
  const std::size_t esize = size_of(d);
  const Layout layout(model, esize);
  cuda::Stream stream;
  Buffers buf(model, layout, a.factor);
  const std::vector<std::byte> host = random_elements(d, layout.tensor_bytes / esize, 3);
  upload(buf.tensors.get(), host);

  const auto pack_batched = [&] { cuda::batched_copy(buf.pack_items, d, stream.get()); };
  const auto unpack_batched = [&] { cuda::batched_copy(buf.unpack_items, d, stream.get()); };
  const auto per_tensor = [&](const std::vector<cuda::CopyItem>& items) {
    return [&items, &stream, esize] {
      for (const cuda::CopyItem& it : items) {
        cuda::check(cudaMemcpyAsync(it.dst, it.src, it.count * esize, cudaMemcpyDeviceToDevice,
                                    stream.get()),
                    "cudaMemcpyAsync");
      }
    };
  };

  pack_batched();
  unpack_batched();
  stream.synchronize();
  const auto [pack_ok, unpack_ok] = check_once(model, layout, buf, host, d, a.factor);

  const int reps = reps_for(2 * layout.fused_bytes);
  const auto timed = [&](const auto& batched, const auto& memcpy_per_tensor) {
    return interleaved_medians(
        stream.get(), [&](int) { batched(); }, reps, [&](int) { memcpy_per_tensor(); }, reps,
        a.iterations, a.warmup);
  };
  const auto [pack_batched_s, pack_memcpy_s] = timed(pack_batched, per_tensor(buf.pack_items));
  const auto [unpack_batched_s, unpack_memcpy_s] =
      timed(unpack_batched, per_tensor(buf.unpack_items));
  const Row rows[] = {
      {"pack", pack_batched_s, pack_memcpy_s, pack_ok},
      {"unpack", unpack_batched_s, unpack_memcpy_s, unpack_ok},
  };
  print_table_head(a, model, d, layout.fused_bytes, reps);
  for (const Row& r : rows) report_row(a, model, d, layout.fused_bytes, r, records);
  std::fflush(stdout);
  return pack_ok && unpack_ok;
}

}  // namespace concord::bench::gpu_kernels

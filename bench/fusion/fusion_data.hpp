// The fusion benchmark's data: every tensor of a model at its offset in one arena,
// this rank's inputs, and the reference each result is checked against.
#pragma once

#include "common/elements.hpp"
#include "fusion/fusion_bench.hpp"

#include <concord/engine.hpp>
#include <concord/types.hpp>

#include <fmt/format.h>

#include <sys/mman.h>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace concord::bench {

// ---------------------------------------------------------------------------------
// Element values. Inputs are small integers, so every sum is exact in every dtype
// (up to 64 ranks in bfloat16, 512 in float16); the reference is computed here in
// double, from values every rank can derive, never by concord.

// Rank r's element i of tensor t is value_at(7r + j), j = (31t + i) % kPeriod: in
// [-4, 4]. The period is prime so that misplaced data (another tensor, a shifted
// offset) does not match, and the values are a hash of x % kPeriod, not x % 9, which
// would repeat every 9 elements: a tensor shifted by 9, or another 9 tensors away,
// would then have passed.
constexpr std::size_t kPeriod = 1009;
inline double value_at(std::size_t x) {
  const std::uint64_t hashed = (x % kPeriod) * std::uint64_t{2654435761};  // Knuth's multiplier
  return static_cast<double>((hashed >> 16) % 9) - 4.0;
}

// A repeating pattern, kPeriod elements long, stored in the dtype and long enough that
// any tensor is filled (or compared) with memcpy/memcmp from `phase` onwards in
// chunks of kChunk elements, a multiple of the period.
class Tape {
 public:
  static constexpr std::size_t kChunk = kPeriod * 64;
  Tape(DataType dtype, const std::function<double(std::size_t)>& value)
      : esize_(size_of(dtype)), bytes_((kChunk + kPeriod) * esize_) {
    for (std::size_t j = 0; j < kChunk + kPeriod; ++j) {
      store_element(&bytes_[j * esize_], dtype, value(j % kPeriod));
    }
  }
  void fill(std::byte* dst, std::size_t count, std::size_t phase) const {
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      std::memcpy(dst + done * esize_, &bytes_[phase * esize_], n * esize_);
    }
  }
  // Index of the first element that differs, or count.
  std::size_t mismatch(const std::byte* src, std::size_t count, std::size_t phase) const {
    for (std::size_t done = 0; done < count; done += kChunk) {
      const std::size_t n = std::min(kChunk, count - done);
      if (std::memcmp(src + done * esize_, &bytes_[phase * esize_], n * esize_) != 0) {
        for (std::size_t i = 0; i < n; ++i) {
          if (std::memcmp(src + (done + i) * esize_, &bytes_[(phase + i) * esize_], esize_) != 0)
            return done + i;
        }
      }
    }
    return count;
  }

 private:
  std::size_t esize_;
  std::vector<std::byte> bytes_;
};

// Every tensor at its offset in one arena, back to back, as a framework's gradient
// buffer; `flat` reduces the whole arena.
struct AlignedFree {
  static constexpr std::size_t kAlign = std::size_t{2} << 20;
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
};
using Arena = std::unique_ptr<std::byte[], AlignedFree>;

// 2 MiB-aligned with transparent huge pages, as allreduce_bench's buffers and the
// allocators of training frameworks for large tensors; first touched here.
inline Arena make_arena(std::size_t bytes) {
  Arena a(static_cast<std::byte*>(
      ::operator new[](std::max<std::size_t>(bytes, 1), std::align_val_t{AlignedFree::kAlign})));
  if (bytes >= AlignedFree::kAlign) ::madvise(a.get(), bytes, MADV_HUGEPAGE);
  std::memset(a.get(), 0, bytes);
  return a;
}

class Data {
 public:
  Data(const Model& model, const FusionOptions& o, int rank, int ranks)
      : model_(model),
        o_(o),
        ranks_(ranks),
        esize_(size_of(o.dtype)),
        sums_(reference_sums(ranks)),
        arena_(make_arena(model.elements * esize_)),
        input_(o.dtype,
               [rank](std::size_t j) { return value_at(7 * static_cast<std::size_t>(rank) + j); }),
        expected_(o.dtype, [this](std::size_t j) { return sums_[j]; }) {
    std::size_t offset = 0;
    for (const ModelTensor& t : model.tensors) {
      offsets_.push_back(offset);
      offset += t.elements;
    }
  }

  std::byte* arena() const { return arena_.get(); }
  TensorView view(std::size_t t) const {
    return {arena_.get() + offsets_[t] * esize_, model_.tensors[t].elements, o_.dtype};
  }

  // This rank's inputs, before every step (the reductions are in place).
  void fill() const {
    for (std::size_t t = 0; t < model_.tensors.size(); ++t)
      input_.fill(arena_.get() + offsets_[t] * esize_, model_.tensors[t].elements, phase(t, 0));
  }

  // Compares every element with the reference; reports the first difference on stderr.
  bool check(const std::string& impl, int step, int rank) const {
    for (std::size_t t = 0; t < model_.tensors.size(); ++t) {
      const std::byte* got = arena_.get() + offsets_[t] * esize_;
      const std::size_t n = model_.tensors[t].elements;
      const std::size_t bad = o_.op == ReduceOp::Avg ? mismatch_avg(got, n, t)
                                                     : expected_.mismatch(got, n, phase(t, 0));
      if (bad != n) {
        double want = sums_[phase(t, bad)];
        if (o_.op == ReduceOp::Avg) want /= ranks_;
        fmt::print(stderr,
                   "concord-bench fusion: rank {}, {}, step {}: tensor '{}' element {} is {}, "
                   "expected {}\n",
                   rank, impl, step, model_.tensors[t].name, bad,
                   load_element(got + bad * esize_, o_.dtype), want);
        return false;
      }
    }
    return true;
  }

 private:
  std::size_t phase(std::size_t t, std::size_t i) const { return (31 * t + i) % kPeriod; }
  // The reference: element j of the pattern summed over all ranks.
  static std::vector<double> reference_sums(int ranks) {
    std::vector<double> sums(kPeriod, 0.0);
    for (std::size_t j = 0; j < kPeriod; ++j) {
      for (int r = 0; r < ranks; ++r) sums[j] += value_at(7 * static_cast<std::size_t>(r) + j);
    }
    return sums;
  }
  // The average need not be representable: allow the dtype's rounding.
  std::size_t mismatch_avg(const std::byte* got, std::size_t n, std::size_t t) const {
    const double eps = o_.dtype == DataType::Float16    ? 1e-3
                       : o_.dtype == DataType::BFloat16 ? 8e-3
                       : o_.dtype == DataType::Float32  ? 1e-6
                                                        : 1e-14;
    std::size_t j = phase(t, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const double want = sums_[j] / ranks_;
      const double v = load_element(got + i * esize_, o_.dtype);
      if (!(std::fabs(v - want) <= eps * std::max(1.0, std::fabs(want)))) return i;
      if (++j == kPeriod) j = 0;
    }
    return n;
  }

  const Model& model_;
  const FusionOptions& o_;
  int ranks_;
  std::size_t esize_;
  std::vector<double> sums_;
  Arena arena_;
  Tape input_;
  Tape expected_;
  std::vector<std::size_t> offsets_;
};

}  // namespace concord::bench

// The CUDA kernels (src/reduce/cuda_kernels.hpp) against the host kernel table, bit
// for bit: reduce, reduce_many and scale for every dtype x op (batched_copy:
// test_gpu_copy_kernels.cpp; the shared checks: kernel_checks.hpp), counts
// {0, 1, 3, 17, large} (see counts()), pointers aligned, all offset by one element (the packed
// path with a head) and offset against each other (the one-by-one path), dst
// aliasing an input, and guard elements around every region that must not change.
//
// One exception to "bit for bit", documented in cuda_element_ops.cuh: where both
// operands of a floating-point add or multiply are NaN, the host returns either one
// (made quiet) depending on its code path; the device always returns the first.
// Every device result is also compared, with no exception at all, to the same
// functors compiled for the host (cuda_element_ops.cuh), which the CPU unit test
// checks against the host table.
#include "gpu/kernel_checks.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using namespace gpu_kernel_checks;

// ---- reduce -------------------------------------------------------------------------

struct Placement {
  const char* name;
  std::size_t a, b, dst;  // element offsets past the guard
};
constexpr Placement kPlacements[] = {
    {"aligned", 0, 0, 0}, {"all offset by one element", 1, 1, 1}, {"offsets differ", 1, 0, 2}};
enum class Alias { Distinct, DstIsA, DstIsB };

template <class T>
void check_reduce(DataType d, ReduceOp op, std::size_t count, const Placement& place, Alias alias,
                  const std::vector<T>& a0, const std::vector<T>& b0, const std::vector<T>& d0,
                  cuda::Stream& stream) {
  INFO(concord::to_string(d) << " " << concord::to_string(op) << " count " << count << ", "
                             << place.name << ", alias "
                             << (alias == Alias::Distinct ? "none"
                                 : alias == Alias::DstIsA ? "dst == a"
                                                          : "dst == b"));
  // Host mirror: the same buffers, offsets and aliasing, through the host table.
  std::vector<T> ha = a0, hb = b0, hd = d0;
  DeviceArray<T> da(a0), db(b0), dd(d0);
  const std::size_t ia = kGuard + place.a, ib = kGuard + place.b;
  std::size_t id = kGuard + place.dst;
  std::vector<T>* host_out = &hd;
  DeviceArray<T>* dev_out = &dd;
  if (alias == Alias::DstIsA) {
    id = ia;
    host_out = &ha;
    dev_out = &da;
  } else if (alias == Alias::DstIsB) {
    id = ib;
    host_out = &hb;
    dev_out = &db;
  }
  T* host_dst = host_out->data();
  T* dev_dst = dev_out->at(0);
  concord::detail::reduce_kernel_from("generic", d, op)(host_dst + id, ha.data() + ia,
                                                        hb.data() + ib, count);
  cuda::reduce(dev_dst + id, da.at(ia), db.at(ib), count, d, op, stream.get());
  stream.synchronize();
  const std::vector<T> got = dev_out->download();
  const std::vector<T>& want = *host_out;
  Report vs_host, vs_functor;
  ops::visit_reduce_op(d, op, [&](auto f) {
    if constexpr (std::is_same_v<typename decltype(f)::value_type, T>) {
      for (std::size_t i = 0; i < got.size(); ++i) {
        const bool inside = i >= id && i < id + count;
        if (!inside) {  // guards and the rest: untouched
          if (bits64(got[i]) != bits64(want[i])) vs_host.add(i, want[i], got[i]);
          continue;
        }
        const T x = a0[ia + (i - id)];
        const T y = b0[ib + (i - id)];
        if (bits64(got[i]) != bits64(f(x, y))) vs_functor.add(i, f(x, y), got[i]);
        if (bits64(got[i]) != bits64(want[i]) && !both_nan_other_choice(d, x, y, want[i], got[i])) {
          vs_host.add(i, want[i], got[i]);
        }
      }
    }
  });
  CAPTURE(vs_host.first, vs_functor.first);
  CHECK(vs_host.bad == 0);
  CHECK(vs_functor.bad == 0);
}

}  // namespace

TEST_CASE("cuda reduce matches the host table for every dtype, op, count and alignment",
          "[gpu][kernels]") {
  std::mt19937_64 rng(1);
  cuda::Stream stream;
  for (DataType d : kAllTypes) {
    with_element_type(d, [&]<class T>() {
      for (std::size_t count : counts()) {
        const std::size_t total = count + 2 * kGuard + 2;
        const auto a = random_vector<T>(d, total, rng);
        const auto b = random_vector<T>(d, total, rng);
        const auto dst = random_vector<T>(d, total, rng);
        for (ReduceOp op : kAllOps) {
          if (!concord::is_supported(d, op)) continue;
          for (const Placement& place : kPlacements) {
            for (Alias alias : {Alias::Distinct, Alias::DstIsA, Alias::DstIsB}) {
              check_reduce<T>(d, op, count, place, alias, a, b, dst, stream);
            }
          }
        }
      }
    });
  }
}

TEST_CASE("cuda reduce: every Float16 and BFloat16 value through the hardware path",
          "[gpu][kernels]") {
  // The device widens and narrows Float16 with the hardware conversions; the host
  // with half.hpp's portable ones. Every 16-bit value against 64 partners (specials
  // and random), both ways round, for Sum and Prod: rounding, ties, subnormals,
  // overflow, NaNs.
  std::mt19937_64 rng(2);
  cuda::Stream stream;
  for (DataType d : {DataType::Float16, DataType::BFloat16}) {
    std::vector<std::uint16_t> partners = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400,
                                           0x3c00, 0xbc00, 0x7bff, 0x7c00, 0xfc00, 0x7e00,
                                           0x7c01, 0xfd55, 0x3800, 0x4000};
    while (partners.size() < 64) partners.push_back(random_value<std::uint16_t>(d, rng));
    std::vector<std::uint16_t> a, b;
    for (unsigned x = 0; x < 65536; ++x) {
      for (std::uint16_t y : partners) {
        a.push_back(static_cast<std::uint16_t>(x));
        b.push_back(y);
        a.push_back(y);
        b.push_back(static_cast<std::uint16_t>(x));
      }
    }
    std::vector<std::uint16_t> a_guarded(kGuard, 0), b_guarded(kGuard, 0);
    a_guarded.insert(a_guarded.end(), a.begin(), a.end());
    b_guarded.insert(b_guarded.end(), b.begin(), b.end());
    a_guarded.resize(a_guarded.size() + kGuard + 2);
    b_guarded.resize(b_guarded.size() + kGuard + 2);
    const std::vector<std::uint16_t> dst(a_guarded.size(), 0x5555);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod}) {
      check_reduce<std::uint16_t>(d, op, a.size(), kPlacements[0], Alias::Distinct, a_guarded,
                                  b_guarded, dst, stream);
    }
  }
}

TEST_CASE("cuda reduce_many equals the pairwise reductions, left to right", "[gpu][kernels]") {
  std::mt19937_64 rng(3);
  cuda::Stream stream;
  for (DataType d : kAllTypes) {
    with_element_type(d, [&]<class T>() {
      for (ReduceOp op : kAllOps) {
        if (!concord::is_supported(d, op)) continue;
        for (std::size_t n : {1, 2, 3, 16, 17, 40}) {
          for (std::size_t count : counts()) {
            for (int layout = 0; layout < 3; ++layout) {
              // 0: aligned; 1: every buffer offset by one element; 2: odd sources offset.
              for (bool dst_is_first : {false, true}) {
                // The large count: two cases, to keep the host reference quick (17
                // sources: two chained launches, dst as the running accumulator).
                if (count > 1000 && !((n == 2 && layout == 0 && !dst_is_first) ||
                                      (n == 17 && layout == 1 && dst_is_first))) {
                  continue;
                }
                INFO(concord::to_string(d)
                     << " " << concord::to_string(op) << " n " << n << " count " << count
                     << " layout " << layout << (dst_is_first ? ", dst == srcs[0]" : ""));
                const std::size_t total = count + 2 * kGuard + 2;
                std::vector<std::vector<T>> host;
                std::vector<DeviceArray<T>> device;
                device.reserve(n + 1);
                std::vector<std::size_t> offset;
                for (std::size_t k = 0; k < n; ++k) {
                  host.push_back(random_vector<T>(d, total, rng));
                  device.emplace_back(host.back());
                  offset.push_back(kGuard + (layout == 1 ? 1 : layout == 2 ? k % 2 : 0));
                }
                std::vector<T> dst0 = random_vector<T>(d, total, rng);
                device.emplace_back(dst0);
                const std::size_t dst_offset = dst_is_first ? offset[0] : kGuard + (layout == 1);
                // Host: dst = srcs[0], then dst = dst op srcs[k], one pairwise call each.
                std::vector<T> want = dst_is_first ? host[0] : dst0;
                std::copy_n(host[0].begin() + static_cast<std::ptrdiff_t>(offset[0]), count,
                            want.begin() + static_cast<std::ptrdiff_t>(dst_offset));
                const auto fn = concord::detail::reduce_kernel_from("generic", d, op);
                for (std::size_t k = 1; k < n; ++k) {
                  fn(want.data() + dst_offset, want.data() + dst_offset, host[k].data() + offset[k],
                     count);
                }
                // The same chain with the host-compiled functors: the exact expectation.
                std::vector<T> exact(want.begin(), want.end());
                ops::visit_reduce_op(d, op, [&](auto f) {
                  if constexpr (std::is_same_v<typename decltype(f)::value_type, T>) {
                    for (std::size_t i = 0; i < count; ++i) {
                      T acc = host[0][offset[0] + i];
                      for (std::size_t k = 1; k < n; ++k) acc = f(acc, host[k][offset[k] + i]);
                      exact[dst_offset + i] = acc;
                    }
                  }
                });
                std::vector<const void*> srcs;
                for (std::size_t k = 0; k < n; ++k) srcs.push_back(device[k].at(offset[k]));
                DeviceArray<T>& out = dst_is_first ? device[0] : device[n];
                cuda::reduce_many(out.at(dst_offset), srcs.data(), n, count, d, op, stream.get());
                stream.synchronize();
                const std::vector<T> got = out.download();
                Report vs_host, vs_functor;
                for (std::size_t i = 0; i < total; ++i) {
                  if (bits64(got[i]) != bits64(exact[i])) vs_functor.add(i, exact[i], got[i]);
                  // vs the host table: exact, except where the host's own pairwise
                  // calls picked the other NaN (then both are NaN).
                  if (bits64(got[i]) != bits64(want[i]) &&
                      !(is_nan_value(d, got[i]) && is_nan_value(d, want[i]))) {
                    vs_host.add(i, want[i], got[i]);
                  }
                }
                CAPTURE(vs_host.first, vs_functor.first);
                CHECK(vs_host.bad == 0);
                CHECK(vs_functor.bad == 0);
              }
            }
          }
        }
      }
    });
  }
}

TEST_CASE("cuda scale matches the host scale for every float type, factor and count",
          "[gpu][kernels]") {
  std::mt19937_64 rng(4);
  cuda::Stream stream;
  const double factors[] = {0.5,
                            1.0 / 3.0,
                            1.0,
                            -2.0,
                            0.0,
                            1e-30,
                            1e30,
                            1e-300,
                            1e300,
                            std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
  for (DataType d : kFloatTypes) {
    with_element_type(d, [&]<class T>() {
      std::vector<std::size_t> scaled_counts = counts();
      if constexpr (sizeof(T) == 2) scaled_counts.push_back(65536);  // every value, below
      for (std::size_t count : scaled_counts) {
        std::vector<T> x0 = random_vector<T>(d, count + 2 * kGuard + 1, rng);
        if constexpr (sizeof(T) == 2) {
          if (count == 65536) {
            for (std::size_t i = 0; i < count; ++i) x0[kGuard + i] = static_cast<T>(i);
          }
        }
        for (double factor : factors) {
          for (std::size_t offset : {0, 1}) {
            INFO(concord::to_string(d)
                 << " count " << count << " factor " << factor << " offset " << offset);
            const std::size_t at = kGuard + offset;
            std::vector<T> want = x0;
            concord::detail::scale_kernel_from("generic", d)(want.data() + at, count, factor);
            DeviceArray<T> dev(x0);
            cuda::scale(dev.at(at), count, d, factor, stream.get());
            stream.synchronize();
            const std::vector<T> got = dev.download();
            Report vs_host, vs_functor;
            ops::visit_scale_op(d, factor, false, [&](auto f) {
              if constexpr (std::is_same_v<typename decltype(f)::value_type, T>) {
                for (std::size_t i = 0; i < got.size(); ++i) {
                  const bool inside = i >= at && i < at + count;
                  const T exact = inside ? f(x0[i]) : x0[i];
                  if (bits64(got[i]) != bits64(exact)) vs_functor.add(i, exact, got[i]);
                  if (bits64(got[i]) != bits64(want[i]) &&
                      !(inside && is_nan_value(d, x0[i]) && factor != factor)) {
                    vs_host.add(i, want[i], got[i]);
                  }
                }
              }
            });
            CAPTURE(vs_host.first, vs_functor.first);
            CHECK(vs_host.bad == 0);
            CHECK(vs_functor.bad == 0);
          }
        }
      }
    });
  }
}

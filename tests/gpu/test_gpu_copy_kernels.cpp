// The CUDA batched_copy kernel (src/reduce/cuda_kernels.hpp) against a host copy
// and the host scale table, bit for bit: every dtype, batches from empty to more
// items than one launch takes, at irregular offsets; and the kernels' argument
// errors. The shared checks are in kernel_checks.hpp.
#include "gpu/kernel_checks.hpp"

#include <concord/error.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

namespace {

using namespace gpu_kernel_checks;

// A batch of tensors laid out in a source and a destination arena at independent,
// irregular offsets (so source and destination alignments differ item by item),
// copied (factor 1) or scaled in one batched_copy call.
template <class T>
void check_batched_copy(DataType d, const std::vector<std::size_t>& sizes, std::mt19937_64& rng,
                        cuda::Stream& stream) {
  const double float_factors[] = {1.0,  1.0,       0.5,
                                  -3.0, 1.0 / 3.0, std::numeric_limits<double>::quiet_NaN()};
  std::vector<std::size_t> src_at, dst_at;
  std::vector<double> factor;
  std::size_t src_total = kGuard, dst_total = kGuard + rng() % 8;
  for (std::size_t n : sizes) {
    src_total += rng() % 4;
    dst_total += rng() % 4;
    src_at.push_back(src_total);
    dst_at.push_back(dst_total);
    src_total += n;
    dst_total += n;
    factor.push_back(concord::is_floating_point(d) ? float_factors[rng() % std::size(float_factors)]
                                                   : 1.0);
  }
  src_total += kGuard;
  dst_total += kGuard;
  const std::vector<T> src0 = random_vector<T>(d, src_total, rng);
  const std::vector<T> dst0 = random_vector<T>(d, dst_total, rng);
  DeviceArray<T> src(src0), dst(dst0);

  std::vector<T> want = dst0;
  std::vector<cuda::CopyItem> items;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    std::copy_n(src0.begin() + static_cast<std::ptrdiff_t>(src_at[t]), sizes[t],
                want.begin() + static_cast<std::ptrdiff_t>(dst_at[t]));
    if (factor[t] != 1.0) {
      concord::detail::scale_kernel_from("generic", d)(want.data() + dst_at[t], sizes[t],
                                                       factor[t]);
    }
    items.push_back({src.at(src_at[t]), dst.at(dst_at[t]), sizes[t], factor[t]});
  }
  cuda::batched_copy(items, d, stream.get());
  stream.synchronize();
  const std::vector<T> got = dst.download();
  std::vector<bool> nan_factor_region(dst_total, false);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    if (factor[t] != factor[t]) {
      std::fill_n(nan_factor_region.begin() + static_cast<std::ptrdiff_t>(dst_at[t]), sizes[t],
                  true);
    }
  }
  Report report;
  for (std::size_t i = 0; i < dst_total; ++i) {
    if (bits64(got[i]) == bits64(want[i])) continue;
    // A NaN element times a NaN factor: the host may return either NaN.
    if (nan_factor_region[i] && is_nan_value(d, got[i]) && is_nan_value(d, want[i])) continue;
    report.add(i, want[i], got[i]);
  }
  INFO(concord::to_string(d) << ", " << sizes.size() << " items");
  CAPTURE(report.first);
  CHECK(report.bad == 0);
}

}  // namespace

TEST_CASE("cuda batched_copy packs and scales every item, in as many launches as needed",
          "[gpu][kernels]") {
  std::mt19937_64 rng(5);
  cuda::Stream stream;
  // Item sizes: empty, below one 16-byte pack, one 16 KiB chunk for Int8, and several
  // chunks for every type; one item of the large count (a grid-stride pass or more).
  const std::size_t pool[] = {0, 1, 2, 3, 7, 17, 64, 1000, 4099, 8195, 16384, 40009};
  for (DataType d : kAllTypes) {
    with_element_type(d, [&]<class T>() {
      for (std::size_t n_items : {0, 1, 5, 32, 33, 40, 512, 513, 1200}) {
        std::vector<std::size_t> sizes;
        for (std::size_t i = 0; i < n_items; ++i) sizes.push_back(pool[rng() % std::size(pool)]);
        if (n_items == 5) sizes[2] = large_count();
        check_batched_copy<T>(d, sizes, rng, stream);
      }
      check_batched_copy<T>(d, {0, 0, 0}, rng, stream);  // nothing to copy
    });
  }
}

TEST_CASE("cuda kernels: count 0 launches nothing; bad arguments throw concord::Error",
          "[gpu][kernels]") {
  cuda::Stream stream;
  CHECK_NOTHROW(
      cuda::reduce(nullptr, nullptr, nullptr, 0, DataType::Float32, ReduceOp::Sum, stream.get()));
  const void* none[] = {nullptr};
  CHECK_NOTHROW(
      cuda::reduce_many(nullptr, none, 1, 0, DataType::Int8, ReduceOp::Max, stream.get()));
  CHECK_NOTHROW(cuda::scale(nullptr, 0, DataType::BFloat16, 0.5, stream.get()));
  CHECK_NOTHROW(cuda::batched_copy({}, DataType::Float64, stream.get()));
  stream.synchronize();

  auto code_of = [](auto&& call) {
    try {
      call();
    } catch (const concord::Error& e) {
      return e.code();
    }
    return concord::ErrorCode{};
  };
  cuda::DeviceBuffer buf(64);
  using concord::ErrorCode;
  CHECK(code_of([&] {
          cuda::reduce(buf.get(), buf.get(), buf.get(), 4, DataType::Int32, ReduceOp::Avg,
                       stream.get());
        }) == ErrorCode::InvalidArgument);
  CHECK(code_of([&] { cuda::scale(buf.get(), 4, DataType::Int64, 0.5, stream.get()); }) ==
        ErrorCode::InvalidArgument);
  CHECK(code_of([&] {
          cuda::reduce_many(buf.get(), none, 0, 4, DataType::Float32, ReduceOp::Sum, stream.get());
        }) == ErrorCode::InvalidArgument);
  const cuda::CopyItem scaled_int[] = {{buf.get(), buf.get() + 32, 4, 2.0}};
  CHECK(code_of([&] { cuda::batched_copy(scaled_int, DataType::Int8, stream.get()); }) ==
        ErrorCode::InvalidArgument);
  stream.synchronize();
}

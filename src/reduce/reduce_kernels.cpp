// Picks the kernel table once, at first use: AVX2 (+F16C, FMA) when the CPU and OS
// support it, the generic table otherwise. CONCORD_REDUCE_ISA=generic forces the
// generic table (to test it on AVX2 machines); =avx2 asks for AVX2 but still falls
// back when it is unavailable; anything else, or unset, means the best available.
#include "reduce/reduce_kernels.hpp"

#include "reduce/reduce_tables.hpp"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__clang__)
#include <cpuid.h>
#endif

namespace concord::detail {
namespace {

bool cpu_runs_avx2_table() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();  // needed if we run before libgcc's own constructor
  // "avx2" also checks that the OS saves the YMM state (XCR0).
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
#if defined(__clang__)
  // Older clang knows no "f16c" feature string: CPUID.1:ECX.F16C[bit 29].
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return __builtin_cpu_supports("f16c");
#endif
#else
  return false;
#endif
}

const ReduceTable* table_named(const char* isa) noexcept {
  if (isa == nullptr) return nullptr;
  if (std::strcmp(isa, "generic") == 0) return &generic_reduce_table();
  // The CPU check comes first: nothing in the AVX2 TU runs on a CPU without AVX2.
  if (std::strcmp(isa, "avx2") == 0 && cpu_runs_avx2_table()) return avx2_reduce_table();
  return nullptr;
}

const ReduceTable& choose_table() noexcept {
  const char* forced = std::getenv("CONCORD_REDUCE_ISA");
  if (forced != nullptr && std::strcmp(forced, "generic") == 0) return generic_reduce_table();
  if (const ReduceTable* avx2 = table_named("avx2")) return *avx2;
  return generic_reduce_table();
}

const ReduceTable& active_table() noexcept {
  static const ReduceTable& table = choose_table();  // thread-safe, once
  return table;
}

bool in_range(DataType dtype, ReduceOp op) noexcept {
  return static_cast<std::size_t>(dtype) < kNumDataTypes &&
         static_cast<std::size_t>(op) < kNumReduceOps;
}

ReduceFn lookup(const ReduceTable& table, DataType dtype, ReduceOp op) noexcept {
  if (!in_range(dtype, op) || !is_supported(dtype, op)) return nullptr;
  return table.reduce[static_cast<std::size_t>(dtype)][static_cast<std::size_t>(op)];
}

ScaleFn lookup_scale(const ReduceTable& table, DataType dtype) noexcept {
  if (static_cast<std::size_t>(dtype) >= kNumDataTypes) return nullptr;
  return table.scale[static_cast<std::size_t>(dtype)];
}

}  // namespace

bool reduce_isa_available(const char* isa) noexcept {
  return table_named(isa) != nullptr;
}

ReduceFn reduce_kernel_from(const char* isa, DataType dtype, ReduceOp op) noexcept {
  const ReduceTable* table = table_named(isa);
  return table != nullptr ? lookup(*table, dtype, op) : nullptr;
}

ScaleFn scale_kernel_from(const char* isa, DataType dtype) noexcept {
  const ReduceTable* table = table_named(isa);
  return table != nullptr ? lookup_scale(*table, dtype) : nullptr;
}

ReduceFn reduce_kernel(DataType dtype, ReduceOp op) {
  return lookup(active_table(), dtype, op);
}

void scale(void* buf, std::size_t count, DataType dtype, double factor) {
  // Precondition: is_floating_point(dtype); integer types are left untouched.
  if (ScaleFn fn = lookup_scale(active_table(), dtype)) fn(buf, count, factor);
}

const char* reduce_isa() {
  return active_table().isa;
}

}  // namespace concord::detail

// HostExecutor::copy_streaming (non-temporal stores for large shared-memory
// outputs): every byte of every length and alignment lands where a byte-by-byte
// copy would put it, and nothing around the destination is touched.
#include "reduce/host_executor.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

using concord::DataType;
using concord::ReduceOp;
using concord::detail::HostExecutor;

TEST_CASE("copy_streaming copies every length and alignment exactly", "[executor]") {
  HostExecutor exec(DataType::Float32, ReduceOp::Sum);
  constexpr std::size_t kGuard = 64;
  for (std::size_t bytes : {0u, 1u, 15u, 255u, 256u, 257u, 1000u, 4096u, 65536u + 13u}) {
    for (std::size_t dst_off : {0u, 1u, 8u, 15u}) {
      for (std::size_t src_off : {0u, 3u, 16u}) {
        std::vector<std::uint8_t> src(bytes + src_off);
        for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 1);
        std::vector<std::uint8_t> dst(bytes + dst_off + 2 * kGuard, 0xA5);
        exec.copy_streaming(dst.data() + kGuard + dst_off, src.data() + src_off, bytes);
        bool same = true;
        for (std::size_t i = 0; i < bytes; ++i) {
          same = same && dst[kGuard + dst_off + i] == src[src_off + i];
        }
        bool guards = true;
        for (std::size_t i = 0; i < kGuard + dst_off; ++i) guards = guards && dst[i] == 0xA5;
        for (std::size_t i = kGuard + dst_off + bytes; i < dst.size(); ++i) {
          guards = guards && dst[i] == 0xA5;
        }
        INFO("bytes " << bytes << ", dst offset " << dst_off << ", src offset " << src_off);
        CHECK(same);
        CHECK(guards);
      }
    }
  }
}

#include "transport/peer_reads.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/prctl.h>
#include <sys/uio.h>

#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY (static_cast<unsigned long>(-1))
#endif

namespace concord::detail {

std::string allow_peer_reads() {
  // EINVAL: no Yama in this kernel, nothing to allow.
  if (::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 && errno != EINVAL) {
    return fmt::format("prctl(PR_SET_PTRACER): {}", std::strerror(errno));
  }
  return {};
}

int read_process_memory(pid_t pid, void* to, const void* from, std::size_t bytes) {
  return read_process_memory_with(::process_vm_readv, pid, to, from, bytes);
}

int read_process_memory_with(ProcessReadCall call, pid_t pid, void* to, const void* from,
                             std::size_t bytes) {
  // One iovec pair per call is enough for contiguous ranges; the kernel may
  // still copy less than asked (a partial read), so loop until done.
  auto* dst = static_cast<char*>(to);
  const auto* src = static_cast<const char*>(from);
  // Bound each call: the kernel pins the pages of one call at a time anyway.
  constexpr std::size_t kMaxPerCall = std::size_t{1} << 30;
  while (bytes > 0) {
    const std::size_t n = std::min(bytes, kMaxPerCall);
    iovec local{dst, n};
    iovec remote{const_cast<char*>(src), n};
    const ssize_t got = call(pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    dst += got;
    src += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return 0;
}

}  // namespace concord::detail

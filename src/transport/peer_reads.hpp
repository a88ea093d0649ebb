// Cross-memory attach (Linux process_vm_readv): one process copies straight out
// of another's address space, given its pid and an address there. The kernel
// allows it where the reader may ptrace the owner: same user, and Yama's
// ptrace_scope 0, or 1 with the owner naming readers through
// prctl(PR_SET_PTRACER). Containers often forbid the system call altogether.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>
#include <string>

namespace concord::detail {

// Lets any process of this user read this one (PR_SET_PTRACER_ANY) where Yama
// asks for it; a no-op elsewhere. Returns "" or why it failed.
std::string allow_peer_reads();

// Copies `bytes` from `from` in process `pid` to `to`, looping over partial
// reads (the kernel may copy less than asked). One contiguous range per call,
// so IOV_MAX never applies. Returns 0, or the errno of the failed call (EFAULT
// for a read that stopped short without one).
int read_process_memory(pid_t pid, void* to, const void* from, std::size_t bytes);

// The same loop over `call` in place of process_vm_readv (same signature and
// errno convention), so a test can feed it short reads, EINTR and failures.
using ProcessReadCall = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                                    unsigned long);
int read_process_memory_with(ProcessReadCall call, pid_t pid, void* to, const void* from,
                             std::size_t bytes);

}  // namespace concord::detail

// Run by shm_cma_refused.cmake on 3 ranks of one node, where the last rank
// refuses single-copy reads: either its launcher sets CONCORD_SHM_CMA=0 for it
// alone (no argument), or, with the argument `kernel`, the kernel refuses the
// others' process_vm_readv of it (it makes itself non-dumpable, and every rank
// drops CAP_SYS_PTRACE, which would override that, from its effective set).
// Every rank must fall back to copying through shared memory, agreed: its
// results match a reference computed here, and the library's path counters
// show copy rounds and no single-copy rounds. Each rank prints "rank R: ok".
#include <concord/concord.hpp>

#include "collectives/shared/path_counts.hpp"
#include "mpi/cma_probe.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

using concord::detail::shm_path_count;
using concord::detail::ShmPath;

// Drops CAP_SYS_PTRACE from the effective set (a no-op for a user without it).
bool drop_ptrace_capability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_SYS_PTRACE / 32].effective &= ~(1U << (CAP_SYS_PTRACE % 32));
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Element i of rank r's input is (r + 1) * (i % 7 + 1): small integers, so the
// float sums are exact and the reference is (i % 7 + 1) * p * (p + 1) / 2.
bool allreduce_matches(concord::Communicator& comm, std::size_t count, bool in_place) {
  const int p = comm.size();
  std::vector<float> send(count);
  for (std::size_t i = 0; i < count; ++i) {
    send[i] = static_cast<float>((comm.rank() + 1) * static_cast<int>(i % 7 + 1));
  }
  std::vector<float> recv(count, -1.0f);
  float* out = in_place ? send.data() : recv.data();
  concord::AllreduceOptions options;
  options.algorithm = concord::Algorithm::Hierarchical;
  concord::allreduce(send.data(), out, count, concord::DataType::Float32, concord::ReduceOp::Sum,
                     comm, options);
  for (std::size_t i = 0; i < count; ++i) {
    const float want = static_cast<float>(static_cast<int>(i % 7 + 1) * p * (p + 1) / 2);
    if (out[i] != want) {
      std::printf("rank %d: count %zu in_place %d: element %zu is %g, want %g\n", comm.rank(),
                  count, in_place ? 1 : 0, i, static_cast<double>(out[i]),
                  static_cast<double>(want));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool kernel_refuses = argc > 1 && std::strcmp(argv[1], "kernel") == 0;
  concord::Communicator comm = concord::Communicator::world();
  const bool refuser = comm.rank() == comm.size() - 1;
  if (kernel_refuses) {
    // Only one refusing rank can be made where the others may read each other.
    if (!concord::test::host_allows_cross_memory_attach(MPI_COMM_WORLD)) {
      if (comm.rank() == 0) std::printf("skipped: this host refuses cross-memory attach\n");
      return 0;
    }
    if (!drop_ptrace_capability() || (refuser && ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)) {
      std::printf("rank %d: could not set up the refusal: %s\n", comm.rank(), std::strerror(errno));
      return 2;
    }
  }
  // At or above the default single-copy threshold (256 KiB); the second spans
  // two 4 MiB single-copy rounds. The first call sets the node's arena up.
  bool ok = true;
  std::uint64_t messages = 0;
  for (std::size_t count : {std::size_t{65536} + 5, (std::size_t{1} << 20) + 3}) {
    for (bool in_place : {false, true}) {
      ok = allreduce_matches(comm, count, in_place) && ok;
      ++messages;
      // Set-up is over (the probe ran in the first call): back to normal.
      if (kernel_refuses && refuser) ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
  }
  const std::uint64_t single = shm_path_count(ShmPath::SingleCopy);
  const std::uint64_t copy = shm_path_count(ShmPath::CopyRounds);
  if (single != 0 || copy != messages) {
    std::printf("rank %d: %llu single-copy and %llu copy-round messages, want 0 and %llu\n",
                comm.rank(), static_cast<unsigned long long>(single),
                static_cast<unsigned long long>(copy), static_cast<unsigned long long>(messages));
    ok = false;
  }
  if (ok) std::printf("rank %d: ok\n", comm.rank());
  return ok ? 0 : 1;
}

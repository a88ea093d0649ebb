// Run by shm_no_leftovers.cmake: rank 0 reports its pid (the shared-memory
// segment is named after it) and checks that the segment is already unlinked
// while in use; then the last rank kills itself in the middle of the job and the
// others hang in the next collective until mpiexec tears them down. The kill
// waits for rank 0's report (an allreduce ends on no rank before all have
// entered it), or mpiexec could kill rank 0 before it has printed. Rank 0 also
// reports whether its first message took single-copy reads (256 KiB: the
// default shm_single_copy_bytes), which the script checks against SINGLE_COPY,
// and, with CONCORD_TEST_BUFFERS=shared (the message in an allocate_shared
// buffer on every rank), how many peer reads were in place (IN_PLACE).
#include <concord/concord.hpp>

#include "collectives/shared/path_counts.hpp"
#include "mpi/cma_probe.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <unistd.h>

namespace {

int segments_named_after(int pid) {
  const std::string prefix = "concord-" + std::to_string(pid) + "-";
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) ++found;
  }
  return found;
}

}  // namespace

int main() {
  concord::Communicator comm = concord::Communicator::world();
  constexpr std::size_t kCount = 1 << 16;
  const char* buffers = std::getenv("CONCORD_TEST_BUFFERS");
  const bool shared = buffers != nullptr && std::string_view(buffers) == "shared";
  // From the shared heap, or ordinary memory (allocate_shared's with no heap).
  concord::SharedBuffer memory;
  std::unique_ptr<float[]> plain;
  float* data = nullptr;
  if (shared) {
    memory = concord::allocate_shared(kCount * sizeof(float), comm);
    data = static_cast<float*>(memory.data());
  } else {
    plain = std::make_unique<float[]>(kCount);
    data = plain.get();
  }
  std::fill(data, data + kCount, 1.0f);
  concord::AllreduceOptions options;
  options.algorithm = concord::Algorithm::Hierarchical;  // sets up the segment
  concord::allreduce(data, data, kCount, concord::DataType::Float32, concord::ReduceOp::Sum, comm,
                     options);
  const bool host_allows_cma = concord::test::host_allows_cross_memory_attach(MPI_COMM_WORLD);
  if (comm.rank() == 0) {
    std::printf("pid=%d\n", static_cast<int>(getpid()));
    std::printf("host-allows-cma=%d\n", host_allows_cma ? 1 : 0);
    std::printf("segments-while-running=%d\n", segments_named_after(getpid()));
    std::printf("single-copy-messages=%llu\n",
                static_cast<unsigned long long>(
                    concord::detail::shm_path_count(concord::detail::ShmPath::SingleCopy)));
    std::printf("in-place-reads=%llu\n",
                static_cast<unsigned long long>(
                    concord::detail::peer_access_count(concord::detail::PeerAccess::InputInPlace)));
    std::fflush(stdout);
  }
  if (data[0] != static_cast<float>(comm.size())) {
    std::printf("wrong result %f on rank %d\n", data[0], comm.rank());
    return 1;
  }
  int reported = 1;
  concord::allreduce(&reported, &reported, 1, concord::DataType::Int32, concord::ReduceOp::Sum,
                     comm);
  if (comm.rank() == comm.size() - 1) std::raise(SIGKILL);
  concord::allreduce(data, data, kCount, concord::DataType::Float32, concord::ReduceOp::Sum, comm,
                     options);
  return 0;
}

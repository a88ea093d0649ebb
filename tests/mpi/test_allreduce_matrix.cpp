// Every algorithm x dtype x op x count x in/out-of-place against a serial
// reference computed from inputs every rank can derive.
//
// CONCORD_TEST_LARGE=sampled: the largest count with one op per dtype
// (case_wanted, test_support.hpp). CONCORD_TEST_MAX_COUNT=N leaves out the counts
// above N (a configuration that makes every message take many tiny rounds on many
// ranks). CONCORD_TEST_SHM_PATH=single_copy|copy: the run's large shared-memory
// messages must have taken that path (the library's path counters say), so a
// configuration meant to cover it fails when it silently takes another.
// CONCORD_TEST_BUFFERS=shared: every message's buffers come from allocate_shared;
// shared_even: on the even ranks only (the odd ones use ordinary memory), so
// single copy uses some peers' buffers in place and copies from others; with
// single_copy the counters must show both.
#include <catch2/catch.hpp>

#include <concord/concord.hpp>

#include "collectives/shared/path_counts.hpp"
#include "mpi/cma_probe.hpp"
#include "mpi/test_support.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace concord;
using namespace concord::test;

struct Variant {
  Algorithm algorithm;
  std::size_t ring_segment_bytes;  // 0: default
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  for (Algorithm a : all_algorithms()) {
    v.push_back({a, 0});
    // A small segment so the ring's pipeline runs many segments per block.
    if (a == Algorithm::Ring) v.push_back({Algorithm::Ring, 1024});
  }
  return v;
}

std::vector<std::size_t> counts_for(int ranks) {
  std::vector<std::size_t> counts{0, 1, 2, 3, 7, 1023, 65537};
  // The largest count only on up to 4 ranks: the suite runs on 2 cores.
  if (ranks <= 4) counts.push_back((std::size_t{1} << 20) + 3);
  if (const char* max = std::getenv("CONCORD_TEST_MAX_COUNT"); max != nullptr && *max != '\0') {
    const std::optional<std::size_t> limit = parse_size(max);
    if (!limit) FAIL("CONCORD_TEST_MAX_COUNT must be a count of elements, not '" << max << "'");
    std::erase_if(counts, [limit](std::size_t c) { return c > *limit; });
  }
  return counts;
}

enum class Buffers { Ordinary, Shared, SharedEven };

Buffers buffers_wanted() {
  const char* env = std::getenv("CONCORD_TEST_BUFFERS");
  if (env == nullptr || *env == '\0') return Buffers::Ordinary;
  const std::string_view want(env);
  if (want == "shared") return Buffers::Shared;
  if (want == "shared_even") return Buffers::SharedEven;
  FAIL("CONCORD_TEST_BUFFERS must be shared or shared_even, not '" << want << "'");
  return Buffers::Ordinary;
}

bool uses_shared(Buffers buffers, int rank) {
  return buffers == Buffers::Shared || (buffers == Buffers::SharedEven && rank % 2 == 0);
}

// A message buffer in ordinary memory, or from the node's shared heap. With
// CONCORD_TEST_BUFFERS every rank allocates from the heap (the call is
// collective) and uses it or not; without, none touches the heap.
class MessageBuffer {
 public:
  MessageBuffer(const std::vector<std::byte>& contents, Buffers buffers, int rank,
                const Communicator& comm)
      : shared_(buffers == Buffers::Ordinary ? SharedBuffer()
                                             : allocate_shared(contents.size(), comm)),
        use_shared_(uses_shared(buffers, rank)) {
    if (use_shared_) {
      if (!contents.empty()) std::memcpy(shared_.data(), contents.data(), contents.size());
    } else {
      plain_ = contents;
    }
  }
  std::byte* data() {
    return use_shared_ ? static_cast<std::byte*>(shared_.data()) : plain_.data();
  }
  std::vector<std::byte> contents() const {
    if (!use_shared_) return plain_;
    const auto* p = static_cast<const std::byte*>(shared_.data());
    return std::vector<std::byte>(p, p + shared_.size());
  }

 private:
  SharedBuffer shared_;
  bool use_shared_;
  std::vector<std::byte> plain_;
};

std::uint64_t accesses(concord::detail::PeerAccess access) {
  return concord::detail::peer_access_count(access);
}

// With CONCORD_TEST_BUFFERS and single copy: a peer's shared input was read
// where it lies and an ordinary one copied; a peer's shared output got its
// pieces written into it; and this rank fetched pieces only if its own output
// was ordinary, in place from shared owners and copied from ordinary ones.
void check_peer_accesses(Buffers buffers, int rank, int ranks) {
  using concord::detail::PeerAccess;
  if (buffers == Buffers::Ordinary) return;
  bool shared_peer = false;
  bool ordinary_peer = false;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank) continue;
    (uses_shared(buffers, peer) ? shared_peer : ordinary_peer) = true;
  }
  const bool fetches = !uses_shared(buffers, rank);
  INFO("rank " << rank << ": inputs in place " << accesses(PeerAccess::InputInPlace) << ", copied "
               << accesses(PeerAccess::InputCopied) << "; results written "
               << accesses(PeerAccess::ResultWritten) << ", fetched in place "
               << accesses(PeerAccess::ResultFetchedInPlace) << ", fetched copied "
               << accesses(PeerAccess::ResultFetchedCopied));
  CHECK((accesses(PeerAccess::InputInPlace) > 0) == shared_peer);
  CHECK((accesses(PeerAccess::InputCopied) > 0) == ordinary_peer);
  CHECK((accesses(PeerAccess::ResultWritten) > 0) == shared_peer);
  CHECK((accesses(PeerAccess::ResultFetchedInPlace) > 0) == (fetches && shared_peer));
  CHECK((accesses(PeerAccess::ResultFetchedCopied) > 0) == (fetches && ordinary_peer));
}

// The copied rounds reach into no peer's buffers.
void check_no_peer_accesses() {
  using concord::detail::PeerAccess;
  for (PeerAccess a : {PeerAccess::InputInPlace, PeerAccess::InputCopied, PeerAccess::ResultWritten,
                       PeerAccess::ResultFetchedInPlace, PeerAccess::ResultFetchedCopied}) {
    CHECK(accesses(a) == 0);
  }
}

void check_shm_path_taken(Buffers buffers, int rank, int ranks) {
  using concord::detail::shm_path_count;
  using concord::detail::ShmPath;
  const char* env = std::getenv("CONCORD_TEST_SHM_PATH");
  if (env == nullptr || *env == '\0') return;
  const std::string_view want(env);
  const std::uint64_t single = shm_path_count(ShmPath::SingleCopy);
  const std::uint64_t copy = shm_path_count(ShmPath::CopyRounds);
  INFO("CONCORD_TEST_SHM_PATH=" << want << ": single-copy messages " << single
                                << ", copy-round messages " << copy);
  if (want == "single_copy") {
    // Where the host forbids the system call, concord copies by design (and
    // warns); the results above are still checked, the path cannot be.
    if (!concord::test::host_allows_cross_memory_attach(MPI_COMM_WORLD)) {
      WARN("this host refuses cross-memory attach between processes: single copy not checked");
      return;
    }
    CHECK(single > 0);
    check_peer_accesses(buffers, rank, ranks);
  } else if (want == "copy") {
    CHECK(single == 0);
    CHECK(copy > 0);
    check_no_peer_accesses();
  } else {
    FAIL("CONCORD_TEST_SHM_PATH must be single_copy or copy");
  }
}

}  // namespace

TEST_CASE("allreduce matches a serial reference for every algorithm, dtype, op and count",
          "[matrix]") {
  Communicator comm = Communicator::world();
  const int rank = comm.rank();
  const int ranks = comm.size();
  const Buffers buffers = buffers_wanted();

  for (DataType dtype : all_dtypes()) {
    const std::size_t esize = size_of(dtype);
    for (ReduceOp op : all_ops()) {
      if (!is_supported(dtype, op)) continue;
      for (std::size_t count : counts_for(ranks)) {
        if (!case_wanted(dtype, op, count)) continue;
        const ReferenceCase ref(rank, ranks, count, dtype, op);
        for (const Variant& variant : variants()) {
          for (bool in_place : {false, true}) {
            INFO("ranks=" << ranks << " dtype=" << to_string(dtype) << " op=" << to_string(op)
                          << " count=" << count << " algorithm=" << to_string(variant.algorithm)
                          << " segment=" << variant.ring_segment_bytes << " in_place=" << in_place);
            MessageBuffer send(ref.input, buffers, rank, comm);
            MessageBuffer recv(std::vector<std::byte>(count * esize, std::byte{0x5a}), buffers,
                               rank, comm);
            AllreduceOptions options;
            options.algorithm = variant.algorithm;
            options.ring_segment_bytes = variant.ring_segment_bytes;
            if (in_place) {
              allreduce(send.data(), send.data(), count, dtype, op, comm, options);
              CHECK(ref.mismatch(send.contents()) == "");
            } else {
              allreduce(send.data(), recv.data(), count, dtype, op, comm, options);
              CHECK(send.contents() == ref.input);  // the send buffer is left alone
              CHECK(ref.mismatch(recv.contents()) == "");
            }
          }
        }
      }
    }
  }
  check_shm_path_taken(buffers, rank, ranks);
}

// Communicator: MPI start-up, the private duplicate, topology.
#include <concord/communicator.hpp>
#include <concord/error.hpp>

#include "core/agreement.hpp"
#include "core/communicator_state.hpp"
#include "core/config.hpp"
#include "core/mpi_check.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace concord {

namespace detail {
CommunicatorState::~CommunicatorState() {
  if (!failure && !abort_signal.raised()) return;
  comm.release();
  topology.local.release();
  topology.cross.release();
}
}  // namespace detail

namespace {

void finalize_if_we_initialized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Starts MPI when the application has not; then concord also ends it at exit.
void ensure_mpi_initialized() {
  detail::ensure_not_finalized("concord::Communicator");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  detail::check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                    "MPI_Init_thread");
  std::atexit(finalize_if_we_initialized);
}

// What every rank plans by: the lowest thread level of any rank (the levels
// are ordered), and whether CONCORD_SHM is on for all and off for all (ranks
// that set up shared memory beside ranks that do not would wait for each other).
struct ConstructionAgreement {
  int least_thread_level = MPI_THREAD_SINGLE;
  bool shm_on_every_rank = false;
  bool shm_off_on_every_rank = false;
};

// How the construction's two exchanges over the given communicator wait: like a
// set-up collective, at most CONCORD_TRANSPORT_TIMEOUT_S, with no abort to read yet.
const detail::SetupWait kConstructionWait{
    "the communicator's construction", nullptr,
    "the communicator is not made, and a collective on the MPI communicator it was given may "
    "be left unmatched: end the job (MPI_Abort)"};

// Collective over `comm`, the first exchange of a communicator's construction,
// waited for as kConstructionWait says: a rank that never makes the communicator
// fails the others with Error(Timeout) instead of holding them in MPI for ever.
ConstructionAgreement agree_at_construction(MPI_Comm comm, int rank) {
  struct Mine {
    int thread_level;
    int shm;
  };
  Mine mine{MPI_THREAD_SINGLE, detail::config().shm ? 1 : 0};
  detail::check_mpi(MPI_Query_thread(&mine.thread_level), "MPI_Query_thread", rank);
  const std::vector<Mine> all = detail::gather_over_ranks(comm, mine, rank, kConstructionWait);
  ConstructionAgreement agreed{MPI_THREAD_MULTIPLE, true, true};
  for (const Mine& theirs : all) {
    agreed.least_thread_level = std::min(agreed.least_thread_level, theirs.thread_level);
    agreed.shm_on_every_rank = agreed.shm_on_every_rank && theirs.shm != 0;
    agreed.shm_off_on_every_rank = agreed.shm_off_on_every_rank && theirs.shm == 0;
  }
  return agreed;
}

// concord's private duplicate of `comm` (MPI_Comm_idup), the construction's second
// exchange, waited for as the first: a rank that comes only after its peers timed
// out in the first passes it against their abandoned request, and then fails here
// at the deadline instead of waiting in MPI_Comm_dup for ever. The topology's
// splits after it block: every rank has come by then, short of one whose wait ran
// out in the same moment as a peer's duplicate completed.
MPI_Comm duplicate_at_construction(MPI_Comm comm, int rank) {
  // On the heap: an abandoned MPI_Comm_idup may still write the handle.
  auto dup = std::make_unique<MPI_Comm>(MPI_COMM_NULL);
  MPI_Request request = MPI_REQUEST_NULL;
  detail::check_mpi(MPI_Comm_idup(comm, dup.get(), &request), "MPI_Comm_idup", rank);
  detail::wait_for_setup(request, "MPI_Comm_idup", rank, kConstructionWait, dup);
  return *dup;
}

std::shared_ptr<detail::CommunicatorState> make_state(MPI_Comm comm) {
  detail::ensure_not_finalized("concord::Communicator");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    throw Error(ErrorCode::InvalidArgument, -1,
                "concord::Communicator(MPI_Comm): MPI is not initialized; call MPI_Init or "
                "use concord::Communicator::world()");
  }
  if (comm == MPI_COMM_NULL) {
    throw Error(ErrorCode::InvalidArgument, detail::world_rank_or_unknown(),
                "concord::Communicator(MPI_Comm): MPI_COMM_NULL is not a communicator");
  }
  int inter = 0;
  detail::check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter) {
    throw Error(ErrorCode::InvalidArgument, detail::world_rank_or_unknown(),
                "concord::Communicator(MPI_Comm): an intercommunicator is not supported; make "
                "an intracommunicator of it first (MPI_Intercomm_merge)");
  }
  int given_rank = 0;
  detail::check_mpi(MPI_Comm_rank(comm, &given_rank), "MPI_Comm_rank");
  const ConstructionAgreement agreed = agree_at_construction(comm, given_rank);
  auto state = std::make_shared<detail::CommunicatorState>();
  const MPI_Comm dup = duplicate_at_construction(comm, given_rank);
  state->comm = detail::MpiComm(dup);
  // Errors come back as codes that concord turns into concord::Error.
  detail::check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  detail::check_mpi(MPI_Comm_rank(dup, &state->rank), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(dup, &state->size), "MPI_Comm_size");
  state->topology = detail::detect_topology(dup, detail::config().virtual_nodes);
  state->every_rank_thread_multiple = agreed.least_thread_level == MPI_THREAD_MULTIPLE;
  state->shm = agreed.shm_on_every_rank;
  if (!agreed.shm_on_every_rank && !agreed.shm_off_on_every_rank && state->rank == 0) {
    std::fprintf(stderr,
                 "concord: rank 0: CONCORD_SHM=0 on some ranks but not all; using the MPI "
                 "transport instead of shared memory on every rank\n");
  }
  state->ranks_share_a_node = state->shm && state->topology.max_local_size > 1;
  return state;
}

}  // namespace

Communicator::Communicator(std::shared_ptr<detail::CommunicatorState> state)
    : state_(std::move(state)) {}

Communicator::Communicator(MPI_Comm comm) : state_(make_state(comm)) {}

Communicator Communicator::world() {
  // One duplicate of MPI_COMM_WORLD per process: world() is collective only the
  // first time it is called.
  static std::mutex mutex;
  static std::shared_ptr<detail::CommunicatorState> world_state;
  std::lock_guard lock(mutex);
  detail::ensure_not_finalized("concord::Communicator::world");
  if (!world_state) {
    ensure_mpi_initialized();
    world_state = make_state(MPI_COMM_WORLD);
  }
  return Communicator(world_state);
}

int Communicator::rank() const {
  return state_->rank;
}
int Communicator::size() const {
  return state_->size;
}
int Communicator::local_rank() const {
  return state_->topology.local_rank;
}
int Communicator::local_size() const {
  return state_->topology.local_size;
}
int Communicator::node() const {
  return state_->topology.node;
}
int Communicator::num_nodes() const {
  return state_->topology.num_nodes;
}
void Communicator::abort() const noexcept {
  state_->abort_signal.raise();
}
bool Communicator::aborted() const noexcept {
  return state_->abort_signal.raised();
}
MPI_Comm Communicator::mpi_comm() const {
  return state_->comm.get();
}

}  // namespace concord

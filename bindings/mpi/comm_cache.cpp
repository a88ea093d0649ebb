#include "comm_cache.hpp"

#include "guard.hpp"

#include <concord/error.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace concord::mpi_interposer {
namespace {

struct Entry {
  Communicator communicator;
};

// The attribute value of an intercommunicator: remembered so the kind is asked once.
char intercommunicator_marker;

// Live entries and the communicators they hang on, for release_all().
std::mutex registry_mutex;
std::unordered_map<Entry*, MPI_Comm>& registry() {
  static std::unordered_map<Entry*, MPI_Comm> entries;
  return entries;
}

// The hot path: each thread remembers the last communicator it asked for and its
// answer, valid while `generation` is unchanged. Every delete callback (MPI_Comm_free,
// MPI_Comm_disconnect, MPI_Finalize) bumps it before MPI can reuse the freed handle,
// and every remembered handle carries our attribute, so a freed communicator's
// handle given to a new one never finds the old answer. Saves the attribute lookup
// (MPI_Comm_get_attr: ~200 instructions and MPI's lock at MPI_THREAD_MULTIPLE).
std::atomic<std::uint64_t> generation{1};
struct LastUsed {
  MPI_Comm comm;
  const Communicator* communicator;  // nullptr: an intercommunicator
  std::uint64_t generation;          // 0 (never current): nothing remembered
};
thread_local LastUsed last_used CONCORD_MPI_HOT_TLS = {};

int delete_entry(MPI_Comm, int, void* value, void*) {
  generation.fetch_add(1, std::memory_order_acq_rel);
  if (value == &intercommunicator_marker) return MPI_SUCCESS;
  auto* entry = static_cast<Entry*>(value);
  {
    std::lock_guard lock(registry_mutex);
    registry().erase(entry);
  }
  const InsideConcord guard;  // the Communicator frees its duplicates (not via us)
  delete entry;
  return MPI_SUCCESS;
}

int keyval() {
  static int key = MPI_KEYVAL_INVALID;
  static std::once_flag once;
  std::call_once(once, [] {
    // Not copied by MPI_Comm_dup: each communicator gets its own concord duplicate.
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_entry, &key, nullptr) !=
        MPI_SUCCESS) {
      key = MPI_KEYVAL_INVALID;
    }
  });
  if (key == MPI_KEYVAL_INVALID) {
    throw Error(ErrorCode::MpiError, -1, "concord_mpi: MPI_Comm_create_keyval failed");
  }
  return key;
}

void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) {
    throw Error(ErrorCode::MpiError, -1, std::string("concord_mpi: ") + call + " failed");
  }
}

// The attribute's answer, made on first use.
CommRoute look_up_or_make(MPI_Comm comm) {
  const int key = keyval();
  void* value = nullptr;
  int found = 0;
  // A handle MPI does not know (a freed communicator's, garbage): the call goes
  // to PMPI_Allreduce, which reports MPI_ERR_COMM as it would without us.
  if (PMPI_Comm_get_attr(comm, key, &value, &found) != MPI_SUCCESS) return {nullptr, true};
  if (found) {
    if (value == &intercommunicator_marker) return {};
    return {&static_cast<Entry*>(value)->communicator};
  }
  int inter = 0;
  check(PMPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter) {
    check(PMPI_Comm_set_attr(comm, key, &intercommunicator_marker), "MPI_Comm_set_attr");
    return {};
  }
  // Owned here until the attribute holds it (delete_entry frees it from then on).
  auto entry = std::make_unique<Entry>(Entry{Communicator(comm)});
  {
    std::lock_guard lock(registry_mutex);
    registry().emplace(entry.get(), comm);
  }
  if (PMPI_Comm_set_attr(comm, key, entry.get()) != MPI_SUCCESS) {
    delete_entry(comm, key, entry.release(), nullptr);
    check(MPI_ERR_OTHER, "MPI_Comm_set_attr");
  }
  return {&entry.release()->communicator};
}

}  // namespace

CommRoute communicator_for(MPI_Comm comm) {
  const std::uint64_t now = generation.load(std::memory_order_acquire);
  if (last_used.generation == now && last_used.comm == comm) return {last_used.communicator};
  const CommRoute found = look_up_or_make(comm);
  // Only handles carrying the attribute are remembered (a refused one may become
  // a communicator later without a delete callback having run).
  if (found.invalid) return found;
  last_used = {comm, found.communicator, now};  // stale already if a callback ran meanwhile
  return found;
}

void release_all() noexcept {
  std::unordered_map<Entry*, MPI_Comm> live;
  {
    std::lock_guard lock(registry_mutex);
    live = registry();
  }
  if (live.empty()) return;
  int key = MPI_KEYVAL_INVALID;
  try {
    key = keyval();
  } catch (...) {
    return;
  }
  // Deleting the attribute runs delete_entry, which frees the Communicator.
  for (const auto& [entry, comm] : live) PMPI_Comm_delete_attr(comm, key);
}

}  // namespace concord::mpi_interposer

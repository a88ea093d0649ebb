#include "comm_cache.hpp"

#include "guard.hpp"

#include <concord/error.hpp>

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

int delete_entry(MPI_Comm, int, void* value, void*) {
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

}  // namespace

const Communicator* communicator_for(MPI_Comm comm) {
  const int key = keyval();
  void* value = nullptr;
  int found = 0;
  check(PMPI_Comm_get_attr(comm, key, &value, &found), "MPI_Comm_get_attr");
  if (found) {
    if (value == &intercommunicator_marker) return nullptr;
    return &static_cast<Entry*>(value)->communicator;
  }
  int inter = 0;
  check(PMPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter) {
    check(PMPI_Comm_set_attr(comm, key, &intercommunicator_marker), "MPI_Comm_set_attr");
    return nullptr;
  }
  auto* entry = new Entry{Communicator(comm)};
  {
    std::lock_guard lock(registry_mutex);
    registry().emplace(entry, comm);
  }
  if (PMPI_Comm_set_attr(comm, key, entry) != MPI_SUCCESS) {
    delete_entry(comm, key, entry, nullptr);
    check(MPI_ERR_OTHER, "MPI_Comm_set_attr");
  }
  return &entry->communicator;
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

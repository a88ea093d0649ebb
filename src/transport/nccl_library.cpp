#include "transport/nccl_library.hpp"

#include "core/config.hpp"
#include "core/mpi_check.hpp"

#include <concord/error.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <exception>
#include <memory>
#include <optional>

namespace concord::detail {
namespace {

constexpr const char* kDefaultLibrary = "libnccl.so.2";
constexpr const char* kHint =
    "set CONCORD_NCCL_LIBRARY to the path of libnccl.so.2, or CONCORD_NCCL=0 to move device "
    "buffers between nodes through host memory instead";

struct DlClose {
  void operator()(void* handle) const { dlclose(handle); }
};
using LibraryHandle = std::unique_ptr<void, DlClose>;

// Resolves `name` (the ncclX spelling; NCCL also exports pncclX profiling aliases)
// into `fn`, or says why not.
template <typename Fn>
bool resolve(void* handle, const char* name, Fn& fn, const std::string& path, std::string* why) {
  dlerror();  // clear a stale message
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    const char* err = dlerror();
    *why = fmt::format("the NCCL library '{}' lacks {}: {} ({})", path, name,
                       err != nullptr ? err : "symbol is null", kHint);
    return false;
  }
  fn = reinterpret_cast<Fn>(symbol);
  return true;
}

struct Loaded {
  std::optional<NcclLibrary> library;
  std::string why;  // when !library
};

Loaded load() {
  Loaded out;
  std::string path;
  try {
    path = config().nccl_library;
  } catch (const std::exception& e) {
    out.why = e.what();
    return out;
  }
  if (path.empty()) path = kDefaultLibrary;

  LibraryHandle handle(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) {
    const char* err = dlerror();
    out.why = fmt::format("cannot load the NCCL library '{}': {} ({})", path,
                          err != nullptr ? err : "unknown dlopen error", kHint);
    return out;
  }

  NcclLibrary lib;
  void* h = handle.get();
  std::string* why = &out.why;
  if (!resolve(h, "ncclGetVersion", lib.get_version, path, why) ||
      !resolve(h, "ncclGetUniqueId", lib.get_unique_id, path, why) ||
      !resolve(h, "ncclCommInitRank", lib.comm_init_rank, path, why) ||
      !resolve(h, "ncclCommDestroy", lib.comm_destroy, path, why) ||
      !resolve(h, "ncclCommAbort", lib.comm_abort, path, why) ||
      !resolve(h, "ncclCommGetAsyncError", lib.comm_get_async_error, path, why) ||
      !resolve(h, "ncclGetErrorString", lib.get_error_string, path, why) ||
      !resolve(h, "ncclGroupStart", lib.group_start, path, why) ||
      !resolve(h, "ncclGroupEnd", lib.group_end, path, why) ||
      !resolve(h, "ncclSend", lib.send, path, why) ||
      !resolve(h, "ncclRecv", lib.recv, path, why) ||
      !resolve(h, "ncclAllReduce", lib.all_reduce, path, why)) {
    return out;  // `handle` closes the library
  }
  std::string ignored;
  resolve(h, "ncclGetLastError", lib.get_last_error, path, &ignored);  // optional

  if (ncclResult_t rc = lib.get_version(&lib.version); rc != ncclSuccess) {
    out.why = fmt::format("ncclGetVersion of the NCCL library '{}' failed: {} ({})", path,
                          lib.get_error_string(rc), kHint);
    return out;
  }
  // The file the loader actually picked, for messages; the name as given otherwise.
  Dl_info info{};
  lib.path =
      dladdr(reinterpret_cast<void*>(lib.get_version), &info) != 0 && info.dli_fname != nullptr
          ? info.dli_fname
          : path;

  // NCCL stays loaded for the life of the process: its communicators, and threads
  // it starts, may outlive any owner we could give the handle, and unloading NCCL
  // at exit races its own teardown.
  static_cast<void>(handle.release());
  out.library = std::move(lib);
  return out;
}

// Loaded on first use, once per process (a function-local static: thread-safe).
const Loaded& loaded() {
  static const Loaded instance = load();
  return instance;
}

}  // namespace

const NcclLibrary& nccl() {
  const Loaded& l = loaded();
  if (!l.library) throw Error(ErrorCode::InvalidArgument, world_rank_or_unknown(), l.why);
  return *l.library;
}

const NcclLibrary* try_nccl(std::string* why) {
  const Loaded& l = loaded();
  if (!l.library) {
    if (why != nullptr) *why = l.why;
    return nullptr;
  }
  return &*l.library;
}

std::string nccl_version_string(int version) {
  // NCCL_VERSION_CODE is major*10000 + minor*100 + patch since 2.9 and
  // major*1000 + minor*100 + patch before; the old codes all lie below 10000.
  if (version >= 10000) {
    return fmt::format("{}.{}.{}", version / 10000, version % 10000 / 100, version % 100);
  }
  return fmt::format("{}.{}.{}", version / 1000, version % 1000 / 100, version % 100);
}

bool nccl_supports_multi_rank_gpu(int version) {
  return version >= 23000;  // 2.30.0
}

void check_nccl(ncclResult_t result, const char* call, int rank) {
  if (result == ncclSuccess) return;
  std::string message;
  if (const NcclLibrary* lib = try_nccl()) {
    message = fmt::format("{}: {}", call, lib->get_error_string(result));
    // ncclGetLastError holds the detail (e.g. "Duplicate GPU detected").
    if (lib->get_last_error != nullptr) {
      const char* last = lib->get_last_error(nullptr);
      if (last != nullptr && last[0] != '\0') message += fmt::format(" ({})", last);
    }
  } else {
    message = fmt::format("{}: NCCL error {}", call, static_cast<int>(result));
  }
  throw Error(ErrorCode::Internal, rank, message);
}

}  // namespace concord::detail

// NCCL, loaded at run time: libconcord does not depend on libnccl at load time, so
// one build serves machines with and without NCCL (or with another NCCL version
// than the one it was compiled against). CONCORD_NCCL_LIBRARY names the library
// file; otherwise libnccl.so.2 is looked up the usual dlopen way.
#pragma once

#include <nccl.h>

#include <string>

namespace concord::detail {

struct NcclLibrary {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  // NCCL's detailed message for the last failure (e.g. why init refused); may be
  // nullptr, as NCCL before 2.13 does not have it.
  decltype(&ncclGetLastError) get_last_error = nullptr;
  int version = 0;   // as ncclGetVersion reports it, e.g. 22809 for 2.28.9
  std::string path;  // the file that was loaded
};

// The loaded library, or throws concord::Error(InvalidArgument) saying what was
// tried and why it failed (not found, a missing symbol). Loaded once per process.
const NcclLibrary& nccl();
// Like nccl(), but nullptr instead of throwing; `why` gets the reason.
const NcclLibrary* try_nccl(std::string* why = nullptr);

// "2.28.9" from 22809 (and from the pre-2.9 encoding 2708).
std::string nccl_version_string(int version);
// Whether this NCCL runs several ranks on one GPU (2.30 and later, with
// NCCL_MULTI_RANK_GPU_ENABLE=1); earlier versions refuse with "Duplicate GPU".
bool nccl_supports_multi_rank_gpu(int version);

// Throws concord::Error(Internal) with NCCL's message when `result` is not ncclSuccess.
void check_nccl(ncclResult_t result, const char* call, int rank);

}  // namespace concord::detail

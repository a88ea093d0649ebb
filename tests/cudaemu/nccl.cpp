// The NCCL calls concord makes, emulated over MPI for the CUDA emulator: built as
// a shared library that concord loads through CONCORD_NCCL_LIBRARY, as it would
// load libnccl.so.2. Operations queue on the emulated stream (emulator.hpp) and
// move their bytes when the stream runs, so a missing stream synchronisation
// shows here as it would with NCCL.
//
// What it holds concord to, as NCCL does:
//   - sends and receives between two ranks match in the order they were issued,
//     with equal byte counts;
//   - inside ncclGroupStart/End nothing moves until ncclGroupEnd;
//   - several ranks on one GPU: refused ("Duplicate GPU") unless the version is
//     2.30 or later and NCCL_MULTI_RANK_GPU_ENABLE=1 was set before init.
// Environment: CUDAEMU_NCCL_VERSION (default 23000, i.e. 2.30.0).
// ncclCommInitRank finds its peers through files in /tmp named after the
// unique id, then makes an MPI communicator of them (MPI_Comm_create_group over
// MPI_COMM_WORLD, so the ranks must be processes of one MPI job).
#include "cudaemu/emulator.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
};

namespace {

thread_local std::string last_error;

ncclResult_t fail(ncclResult_t result, std::string why) {
  last_error = std::move(why);
  return result;
}

int emulated_version() {
  const char* v = std::getenv("CUDAEMU_NCCL_VERSION");
  return v != nullptr ? std::atoi(v) : 23000;
}

std::size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

// One ncclSend or ncclRecv, waiting for its group's end.
struct PointOp {
  bool send;
  void* buf;
  std::size_t bytes;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};

thread_local int group_depth = 0;
thread_local std::vector<PointOp> group_ops;

// Queues the point-to-point ops on their (common) stream: when it runs, every op
// is posted, then all are waited for, as a group progresses as a whole.
ncclResult_t launch(std::vector<PointOp> ops) {
  if (ops.empty()) return ncclSuccess;
  const cudaStream_t stream = ops.front().stream;
  for (const PointOp& op : ops) {
    if (op.stream != stream) {
      return fail(ncclInvalidUsage, "emulator: one group on several streams is not emulated");
    }
  }
  const cudaError_t rc = cudaemu::enqueue(stream, [ops = std::move(ops)] {
    std::vector<MPI_Request> requests;
    requests.reserve(ops.size());
    for (const PointOp& op : ops) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (op.send) {
        MPI_Isend(op.buf, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 0, op.comm->mpi, &r);
      } else {
        MPI_Irecv(op.buf, static_cast<int>(op.bytes), MPI_BYTE, op.peer, 0, op.comm->mpi, &r);
      }
      requests.push_back(r);
    }
    std::vector<MPI_Status> statuses(requests.size());
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].send) continue;
      int got = 0;
      MPI_Get_count(&statuses[i], MPI_BYTE, &got);
      if (static_cast<std::size_t>(got) != ops[i].bytes) {
        // NCCL has no short receive: mismatched counts corrupt or hang a real run.
        std::fprintf(stderr, "cudaemu nccl: receive of %zu bytes matched a send of %d\n",
                     ops[i].bytes, got);
        std::abort();
      }
    }
  });
  return rc == cudaSuccess ? ncclSuccess : fail(ncclInvalidArgument, "emulator: invalid stream");
}

ncclResult_t point(bool send, void* buf, std::size_t count, ncclDataType_t type, int peer,
                   ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || peer < 0 || peer >= comm->size) {
    return fail(ncclInvalidArgument, "emulator: bad communicator or peer");
  }
  const std::size_t bytes = count * type_bytes(type);
  if (bytes > static_cast<std::size_t>(INT32_MAX)) {
    return fail(ncclInvalidArgument, "emulator: message over 2 GiB");
  }
  PointOp op{send, buf, bytes, peer, comm, stream};
  if (group_depth > 0) {
    group_ops.push_back(op);
    return ncclSuccess;
  }
  return launch({op});
}

std::string id_hex(const ncclUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(id.internal[i]);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(ncclInvalidArgument, "null version");
  *version = emulated_version();
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return fail(ncclInvalidArgument, "null id");
  std::memset(id, 0, sizeof *id);
  std::random_device random;
  for (int i = 0; i < 16; i += 4) {
    const std::uint32_t r = random();
    std::memcpy(id->internal + i, &r, 4);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (out == nullptr || nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument, "emulator: bad ncclCommInitRank arguments");
  }
  *out = nullptr;
  int device = 0;
  cudaGetDevice(&device);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);

  // Rendezvous: every rank leaves "<nccl rank> <world rank> <device>" in a folder
  // named after the id and waits for all of them.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cudaemu-nccl-" + id_hex(id));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  {
    const auto tmp = dir / ("." + std::to_string(rank));
    std::ofstream(tmp) << world_rank << ' ' << device << '\n';
    std::filesystem::rename(tmp, dir / std::to_string(rank), ec);
  }
  std::vector<int> world_ranks(static_cast<std::size_t>(nranks), -1);
  std::vector<int> devices(static_cast<std::size_t>(nranks), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < nranks; ++r) {
    for (;;) {
      std::ifstream in(dir / std::to_string(r));
      if (in >> world_ranks[static_cast<std::size_t>(r)] >> devices[static_cast<std::size_t>(r)]) {
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return fail(ncclSystemError, "emulator: ncclCommInitRank: peers did not arrive in 60 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Ranks of one process's machine see the emulator's GPUs alike: equal ordinals
  // are one GPU.
  std::vector<int> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  const bool shared = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  ncclResult_t verdict = ncclSuccess;
  if (shared) {
    const char* enable = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
    if (emulated_version() < 23000 || enable == nullptr || std::strcmp(enable, "1") != 0) {
      verdict =
          fail(ncclInvalidUsage,
               "Duplicate GPU detected: several ranks on one GPU (emulated NCCL " +
                   std::to_string(emulated_version()) +
                   (emulated_version() < 23000 ? ")" : ", NCCL_MULTI_RANK_GPU_ENABLE not 1)"));
    }
  }

  MPI_Group world_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, nranks, world_ranks.data(), &group);
  MPI_Comm mpi = MPI_COMM_NULL;
  MPI_Comm_create_group(MPI_COMM_WORLD, group, 0x4e43, &mpi);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  // Everyone has read every file: the folder can go.
  MPI_Barrier(mpi);
  std::filesystem::remove(dir / std::to_string(rank), ec);
  MPI_Barrier(mpi);
  if (rank == 0) std::filesystem::remove(dir, ec);
  if (verdict != ncclSuccess) {
    MPI_Comm_free(&mpi);
    return verdict;
  }
  auto* comm = new ncclComm();  // owned by the handle until ncclCommDestroy/Abort
  comm->mpi = mpi;
  comm->rank = rank;
  comm->size = nranks;
  *out = comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  cudaDeviceSynchronize();  // as NCCL, let queued operations finish first
  MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return ncclCommDestroy(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* error) {
  if (comm == nullptr || error == nullptr) return ncclInvalidArgument;
  *error = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    default:
      return "emulated NCCL error";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) {
  return last_error.c_str();
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return ncclSuccess;
  return launch(std::exchange(group_ops, {}));
}

ncclResult_t ncclSend(const void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return point(true, const_cast<void*>(buf), count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void* buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return point(false, buf, count, type, peer, comm, stream);
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "null communicator");
  if (group_depth > 0) return fail(ncclInvalidUsage, "emulator: ncclAllReduce inside a group");
  MPI_Datatype mpi_type = MPI_DATATYPE_NULL;
  switch (type) {
    case ncclInt8:
      mpi_type = MPI_INT8_T;
      break;
    case ncclUint8:
      mpi_type = MPI_UINT8_T;
      break;
    case ncclInt32:
      mpi_type = MPI_INT32_T;
      break;
    case ncclUint32:
      mpi_type = MPI_UINT32_T;
      break;
    case ncclInt64:
      mpi_type = MPI_INT64_T;
      break;
    case ncclUint64:
      mpi_type = MPI_UINT64_T;
      break;
    case ncclFloat32:
      mpi_type = MPI_FLOAT;
      break;
    case ncclFloat64:
      mpi_type = MPI_DOUBLE;
      break;
    default:
      return fail(ncclInvalidArgument, "emulator: ncclAllReduce on this type is not emulated");
  }
  MPI_Op mpi_op = MPI_SUM;
  switch (op) {
    case ncclSum:
    case ncclAvg:
      mpi_op = MPI_SUM;
      break;
    case ncclProd:
      mpi_op = MPI_PROD;
      break;
    case ncclMin:
      mpi_op = MPI_MIN;
      break;
    case ncclMax:
      mpi_op = MPI_MAX;
      break;
    default:
      return fail(ncclInvalidArgument, "emulator: unknown reduction");
  }
  if (op == ncclAvg && type != ncclFloat32 && type != ncclFloat64) {
    return fail(ncclInvalidArgument, "emulator: ncclAvg on integers");
  }
  if (count > static_cast<std::size_t>(INT32_MAX)) {
    return fail(ncclInvalidArgument, "emulator: count over INT32_MAX");
  }
  const cudaError_t rc = cudaemu::enqueue(stream, [=] {
    const void* in = send == recv ? MPI_IN_PLACE : send;
    MPI_Allreduce(in, recv, static_cast<int>(count), mpi_type, mpi_op, comm->mpi);
    if (op == ncclAvg) {
      if (type == ncclFloat32) {
        auto* p = static_cast<float*>(recv);
        for (std::size_t i = 0; i < count; ++i) p[i] /= static_cast<float>(comm->size);
      } else {
        auto* p = static_cast<double*>(recv);
        for (std::size_t i = 0; i < count; ++i) p[i] /= static_cast<double>(comm->size);
      }
    }
  });
  return rc == cudaSuccess ? ncclSuccess : fail(ncclInvalidArgument, "emulator: invalid stream");
}

}  // extern "C"

// The implementations concord-bench allreduce times on host buffers (and on
// device buffers where the build has CUDA and NCCL), each a callable on
// (send, recv, count), by the names --impl accepts.
#pragma once

#include "common/bench_options.hpp"
#if CONCORD_BENCH_NCCL
#include "allreduce/device_bench.hpp"
#endif

#include <concord/communicator.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace concord::bench {

struct Impl {
  std::string name;
  std::string algorithm;
  // One call; on device buffers it may only queue its work.
  std::function<void(const void*, void*, std::size_t)> run;
  bool is_allreduce = true;  // false for the roofline: its output is a copy, not checked
  bool on_shared = false;    // runs on buffers from the shared heap (allocate_shared)
  // Waits for the calls queued so far (device impls: the stream); null for host impls,
  // whose calls are done when they return. Timed calls end with one (nccl-tests).
  std::function<void()> sync = nullptr;
};

// Host implementations; `shared_comm` is concord-shared's communicator.
std::vector<Impl> make_impls(const AllreduceOptions& o, const Communicator& comm,
                             const Communicator& shared_comm);
#if CONCORD_BENCH_NCCL
std::vector<Impl> make_device_impls(const AllreduceOptions& o, const Communicator& comm,
                                    DeviceBench& device);
#endif
// Whether an impl runs on buffers from the shared heap (a name ending in -shared).
bool wants_shared(const AllreduceOptions& o);

}  // namespace concord::bench

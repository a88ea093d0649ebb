// Where a buffer lies, and whether this process can run device collectives at
// all. The path a device buffer takes is chosen in dispatch/ (device_paths.cpp);
// the engine's device buckets are declared in engine/device_buckets.hpp.
#pragma once

#include <concord/types.hpp>

namespace concord::detail {

// Where `ptr` lies, through the pointer-attribute cache; Device::Cpu without a
// CUDA build or device. Cheap when no device is present (one cached flag).
// Device memory of another GPU than the current one: Error(InvalidArgument)
// labelled with `rank`.
Device classify_pointer(const void* ptr, int rank);

// For buffers the caller said are device memory (AllreduceOptions::device):
// Error(InvalidArgument) when `ptr` is device memory of another GPU than the current one.
void check_on_current_gpu(const void* ptr, int rank);

// Error(InvalidArgument), labelled `what`, unless this build has the CUDA path and
// this process sees a CUDA device: the one check behind every Device::Cuda entry.
void require_cuda(const char* what, int rank);

}  // namespace concord::detail

// Where a pointer lies, asked of the CUDA driver, and the process-wide cache of
// the answers (pointer_cache.hpp).
#pragma once

#include "device/pointer_cache.hpp"

namespace concord::detail {

// The driver's answer for `ptr`: cudaPointerGetAttributes, and for device memory
// the whole allocation's range (cuMemGetAddressRange through the runtime's driver
// entry point, so libconcord never links libcuda). Host memory, and every pointer
// in a build without CUDA or a process without a usable device, is Device::Cpu
// with the 4 KiB page holding it as its range. Never throws.
PointerInfo query_pointer(const void* ptr);

// The process-wide cache over query_pointer, CONCORD_POINTER_CACHE_ENTRIES ranges
// (0: no caching, every lookup asks the driver).
PointerCache& pointer_cache();

}  // namespace concord::detail

// The CUDA emulator's queueing, shared by its runtime (state.hpp says which file
// holds what) and the kernel launches of code compiled with kernel.hpp. A test
// double: it lets the device path run on a machine without a GPU, with the
// semantics that decide whether that code is right on a real one (see docs/GPU.md,
// "Emulated runs"):
//   - streams defer their work: nothing queued on a stream runs until something
//     waits for it (a stream or event synchronisation, a synchronous copy, a
//     stream waiting on an event, cudaFree), so a missing synchronisation reads
//     stale data instead of passing by luck;
//   - the legacy default stream orders against blocking streams only, never
//     against non-blocking ones;
//   - device memory is shareable between processes (memfd), so CUDA IPC works
//     across ranks, and a handle cannot be opened by the process that made it;
//   - fresh device memory is filled with 0xCD bytes, not zeros;
//   - copies are bounds-checked against their allocations;
//   - a device has CUDAEMU_DEVICE_MEMORY_BYTES of memory per process (default: the
//     whole device address space), and cudaMalloc beyond it fails;
//   - a kernel's threads run on fibers, its blocks under way together, with
//     __syncthreads a real barrier (grid.hpp);
//   - stream capture records a stream's work into a graph that launches replay
//     (the ops with the parameters they were captured with), and the calls CUDA
//     forbids while a capture is under way (synchronising, allocating) fail and
//     invalidate it;
//   - CUDAEMU_MPS=0: processes sharing an emulated GPU run their kernels one at
//     a time, as without MPS (and with no time slicing).
// What it cannot see: data races between device threads (fibers take turns, never
// run at the same instant), device-only code paths, and timing.
#pragma once

#include <cstddef>
#include <functional>

#include <driver_types.h>

namespace cudaemu {

// Queues `op` on `stream` (nullptr / cudaStreamLegacy: the device's legacy default
// stream) with the ordering rules above. Sets the thread's last error and returns
// it when the stream is invalid.
cudaError_t enqueue(cudaStream_t stream, std::function<void()> op);

// Queues a kernel's grid on `stream`, as enqueue does. Under CUDAEMU_MPS=0 the grid
// takes its GPU's turn first (state.cpp: processes sharing an emulated GPU without
// MPS run their kernels one at a time).
cudaError_t enqueue_kernel(cudaStream_t stream, std::function<void()> grid);

// Records a launch-configuration error as the thread's last error (what a
// failed <<<...>>> launch leaves for cudaGetLastError).
void set_launch_error(cudaError_t error);

}  // namespace cudaemu

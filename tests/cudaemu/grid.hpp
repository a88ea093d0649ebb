// The CUDA emulator's grid scheduler: how a kernel's threads run on the host.
//
// Every thread of a launch runs on a fiber of its own (a small stack of its own), and
// the fibers of all the grid's blocks are interleaved on the host thread that runs the
// stream's work:
//   - blocks start in order and threads in reverse order within a block, each running
//     until it finishes, reaches __syncthreads or pauses in a polling loop
//     (__nanosleep); a block runs on past the barriers all its threads reach until
//     each thread has finished, paused or waits at a barrier the others have not
//     reached, and only then does the next block start: every block gets as far as it
//     can before the later ones have done anything (a kernel whose block reads what
//     another should have written, without waiting for it, reads it unwritten), and
//     the blocks of a grid are under way at the same time, as on a GPU whose grid
//     fits on its multiprocessors;
//   - __syncthreads is a barrier of the block: a thread that reaches it resumes only
//     once every thread of its block that has not exited has reached it too;
//   - a thread paused in __nanosleep resumes on the scheduler's next round, after
//     every other runnable thread has had its turn; when only paused threads are left
//     (they wait for another process, a peer rank), the host thread sleeps briefly
//     between rounds.
// So a kernel whose threads meet at barriers, whose blocks wait for each other's flags,
// or which polls flags that a peer process writes runs here as on a GPU, with the
// block and grid sizes the device path chooses. What it still cannot show: data races
// between threads that do not synchronise (fibers never run at the same instant) and
// the GPU's memory model beyond sequential consistency.
#pragma once

namespace cudaemu {

// One launch as the scheduler sees it. `enter` sets the calling translation unit's
// built-in variables (threadIdx, blockIdx: thread-local in each shared object that
// includes kernel.hpp) before a thread runs or resumes; `run` runs the kernel's body
// for the thread so entered.
struct GridKernel {
  void* context = nullptr;
  void (*enter)(void* context, unsigned block, unsigned thread) = nullptr;
  void (*run)(void* context) = nullptr;
};

// Runs `kernel` for `threads` threads in each of `blocks` blocks, as described above;
// returns when every thread has finished.
void run_grid(unsigned blocks, unsigned threads, const GridKernel& kernel);

// __syncthreads: waits for the rest of the calling thread's block.
void block_barrier();

// __syncthreads_or: the barrier, returning nonzero when `predicate` was nonzero in
// any thread of the block that reached it.
int block_barrier_or(int predicate);

// __nanosleep: lets the other threads of the grid run (and, when none can, other
// processes) before the caller continues.
void poll_pause();

}  // namespace cudaemu

// The grid scheduler (grid.hpp): a kernel's threads as fibers, switched with
// Boost.Context's fcontext (a few nanoseconds a switch; swapcontext's signal-mask
// system call cost a microsecond, which every thread of every launch would pay).
#include "cudaemu/grid.hpp"

#include <boost/context/detail/fcontext.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <thread>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUDAEMU_ASAN_FIBERS 1
#endif

namespace cudaemu {
namespace {

namespace fctx = boost::context::detail;

// ASan's fiber annotations: without them it takes a switch of stacks for a stack
// overflow. No-ops in builds without ASan.
void start_switch(void** fake_stack, const void* bottom, std::size_t bytes) {
#ifdef CUDAEMU_ASAN_FIBERS
  __sanitizer_start_switch_fiber(fake_stack, bottom, bytes);
#else
  (void)fake_stack, (void)bottom, (void)bytes;
#endif
}
void finish_switch(void* fake_stack, const void** old_bottom, std::size_t* old_bytes) {
#ifdef CUDAEMU_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_bytes);
#else
  (void)fake_stack, (void)old_bottom, (void)old_bytes;
#endif
}

// A fiber's stack: mapped on first use (untouched pages cost nothing), with an
// inaccessible page below it so that an overflow faults instead of corrupting.
class Stack {
 public:
  static constexpr std::size_t kBytes = std::size_t{256} << 10;  // ASan's frames are large
  Stack() {
    guard_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, guard_ + kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<std::byte*>(p);
    mprotect(base_, guard_, PROT_NONE);
  }
  ~Stack() { munmap(base_, guard_ + kBytes); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  std::byte* bottom() const { return base_ + guard_; }
  std::byte* top() const { return bottom() + kBytes; }

 private:
  std::byte* base_ = nullptr;
  std::size_t guard_ = 0;
};

enum class State { Running, AtBarrier, Paused, Done };

struct Block {
  unsigned live = 0;         // threads that have not exited
  unsigned arrived = 0;      // of those, waiting at the current barrier
  unsigned generation = 0;   // barriers completed
  bool any = false;          // a predicate of the current barrier was nonzero
  bool any_at_last = false;  // ... of the last completed one (__syncthreads_or)
};

// A thread of the grid and its stack. Slots are pooled per host thread and reused
// from one kernel thread to the next, so a thread costs no allocation (under ASan an
// allocation cost more than the rest of a thread's switches together).
struct Fiber {
  Stack stack;
  const GridKernel* kernel = nullptr;
  Block* block = nullptr;
  unsigned block_index = 0;
  unsigned thread_index = 0;
  State state = State::Running;
  unsigned barrier = 0;  // the block's generation when this thread reached its barrier
  fctx::fcontext_t context = nullptr;    // where to resume this fiber
  fctx::fcontext_t scheduler = nullptr;  // where the fiber returns to
  void* fake_stack = nullptr;            // ASan's, while the fiber is switched out
};

// Thread-local state of the shared library in the initial-exec model: no
// __tls_get_addr call (which ASan intercepts) on every switch.
#define CUDAEMU_TLS thread_local __attribute__((tls_model("initial-exec")))

// Slots of finished threads, for the next ones on this host thread.
CUDAEMU_TLS std::vector<std::unique_ptr<Fiber>> spare_slots;

std::unique_ptr<Fiber> take_slot() {
  if (spare_slots.empty()) return std::make_unique<Fiber>();
  std::unique_ptr<Fiber> f = std::move(spare_slots.back());
  spare_slots.pop_back();
#ifdef CUDAEMU_ASAN_FIBERS
  // The kernel's frames unpoisoned themselves as they returned; the fiber's own
  // bottom frames, which never return, may have left redzones near the top.
  constexpr std::size_t kEntryFrames = std::size_t{4} << 10;
  ASAN_UNPOISON_MEMORY_REGION(f->stack.top() - kEntryFrames, kEntryFrames);
#endif
  return f;
}

// The fiber running on this host thread (null: the scheduler or host code), and the
// scheduler's stack as ASan knows it.
CUDAEMU_TLS Fiber* current = nullptr;
CUDAEMU_TLS const void* scheduler_bottom = nullptr;
CUDAEMU_TLS std::size_t scheduler_bytes = 0;

// From a fiber back to the scheduler; returns when the scheduler resumes it (never,
// once the fiber is Done).
void switch_to_scheduler(Fiber& f) {
  start_switch(f.state == State::Done ? nullptr : &f.fake_stack, scheduler_bottom, scheduler_bytes);
  fctx::transfer_t back = fctx::jump_fcontext(f.scheduler, nullptr);
  f.scheduler = back.fctx;
  finish_switch(f.fake_stack, nullptr, nullptr);
}

void fiber_main(fctx::transfer_t from) noexcept {
  Fiber& f = *static_cast<Fiber*>(from.data);
  f.scheduler = from.fctx;
  finish_switch(nullptr, &scheduler_bottom, &scheduler_bytes);
  f.kernel->run(f.kernel->context);
  f.state = State::Done;
  switch_to_scheduler(f);
  std::fputs("cudaemu: a finished kernel thread was resumed\n", stderr);
  std::terminate();
}

// From the scheduler into `f` until it finishes, waits or pauses.
void resume(Fiber& f) {
  f.kernel->enter(f.kernel->context, f.block_index, f.thread_index);
  f.state = State::Running;
  current = &f;
  void* fake_stack = nullptr;
  start_switch(&fake_stack, f.stack.bottom(), Stack::kBytes);
  fctx::transfer_t back = fctx::jump_fcontext(f.context, &f);
  finish_switch(fake_stack, nullptr, nullptr);
  current = nullptr;
  f.context = back.fctx;
}

void complete_barrier_if_all_arrived(Block& b) {
  if (b.arrived > 0 && b.arrived == b.live) {
    b.arrived = 0;
    ++b.generation;
    b.any_at_last = b.any;
    b.any = false;
  }
}

// Runs `f` for a turn and settles its block's books; false once it has finished.
bool take_turn(std::unique_ptr<Fiber>& f) {
  resume(*f);
  if (f->state != State::Done) return true;
  --f->block->live;
  complete_barrier_if_all_arrived(*f->block);
  spare_slots.push_back(std::move(f));
  return false;
}

bool runnable(const Fiber& f) {
  return f.state == State::Paused ||
         (f.state == State::AtBarrier && f.block->generation != f.barrier);
}

// A block that has just started runs on, past every barrier its threads all reach,
// until each of them has finished, pauses in a polling loop or waits at a barrier the
// others have not reached: then the next block starts. A block thus gets as far as it
// can before any later block has done anything, which a GPU may also do; a kernel
// whose block reads what another block should have written first, without waiting
// for it, reads it unwritten here.
void run_block_ahead(std::vector<std::unique_ptr<Fiber>>& waiting, std::size_t first) {
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t i = first; i < waiting.size(); ++i) {
      std::unique_ptr<Fiber>& f = waiting[i];
      if (!f || f->state != State::AtBarrier || !runnable(*f)) continue;
      moved = true;
      if (!take_turn(f)) f.reset();
    }
  }
  std::erase_if(waiting, [](const std::unique_ptr<Fiber>& f) { return !f; });
}

}  // namespace

void run_grid(unsigned blocks, unsigned threads, const GridKernel& kernel) {
  std::vector<Block> block_books(blocks, Block{threads, 0, 0});
  std::vector<std::unique_ptr<Fiber>> waiting;  // started, not finished
  for (unsigned b = 0; b < blocks; ++b) {
    const std::size_t first = waiting.size();
    for (unsigned t = threads; t-- > 0;) {
      std::unique_ptr<Fiber> f = take_slot();
      f->kernel = &kernel;
      f->block = &block_books[b];
      f->block_index = b;
      f->thread_index = t;
      f->context = fctx::make_fcontext(f->stack.top(), Stack::kBytes, &fiber_main);
      if (take_turn(f)) waiting.push_back(std::move(f));
    }
    run_block_ahead(waiting, first);
  }
  while (!waiting.empty()) {
    // Whether a thread got further this round than pausing again in a polling loop.
    bool progressed = false;
    std::vector<std::unique_ptr<Fiber>> still;
    for (auto& f : waiting) {
      if (runnable(*f)) {
        const bool was_polling = f->state == State::Paused;
        const bool alive = take_turn(f);
        progressed = progressed || !alive || !was_polling || f->state != State::Paused;
        if (!alive) continue;
      }
      still.push_back(std::move(f));
    }
    waiting = std::move(still);
    // Every thread left polls for what another process writes: let it run.
    if (!progressed && !waiting.empty()) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

int block_barrier_or(int predicate) {
  Fiber* f = current;
  if (f == nullptr) return predicate;  // host code: a block of one
  f->state = State::AtBarrier;
  f->barrier = f->block->generation;
  f->block->any = f->block->any || predicate != 0;
  ++f->block->arrived;
  complete_barrier_if_all_arrived(*f->block);
  switch_to_scheduler(*f);
  // No later barrier of the block completes before this thread reaches it.
  return f->block->any_at_last ? 1 : 0;
}

void block_barrier() {
  block_barrier_or(0);
}

void poll_pause() {
  Fiber* f = current;
  if (f == nullptr) {
    std::this_thread::yield();
    return;
  }
  f->state = State::Paused;
  switch_to_scheduler(*f);
}

}  // namespace cudaemu

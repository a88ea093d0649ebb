// What one process_vm_readv of N bytes costs against a memcpy of them, from a
// buffer in 4 KiB pages or in transparent huge pages: the process forks, the
// child keeps the buffer, the parent reads it 200 times (and then copies it 200
// times in its own memory). bench/RESULTS.md, "Tried and not kept".
//   c++ -O2 -o /tmp/cma_read bench/results-pair/cma_read.cpp
//   taskset -c 0 /tmp/cma_read 524288 0; taskset -c 0 /tmp/cma_read 524288 1
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BYTES HUGE(0|1)\n", argv[0]);
    return 2;
  }
  const std::size_t bytes = std::strtoull(argv[1], nullptr, 10);
  const bool huge = std::atoi(argv[2]) != 0;
  constexpr std::size_t kHuge = 2 << 20;
  constexpr int kReads = 200;
  void* map =
      mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* buffer = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(map) + kHuge - 1) &
                                         ~std::uintptr_t{kHuge - 1});
  madvise(buffer, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  std::memset(buffer, 1, bytes);
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  std::vector<char> to(bytes), copy(bytes);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) {
    iovec local{to.data(), bytes};
    iovec remote{buffer, bytes};
    if (process_vm_readv(child, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes)) {
      std::perror("process_vm_readv");
      kill(child, SIGKILL);
      return 1;
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) std::memcpy(copy.data(), to.data(), bytes);
  const auto t2 = std::chrono::steady_clock::now();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  const auto us = [](auto d) {
    return std::chrono::duration<double, std::micro>(d).count() / kReads;
  };
  std::printf("%zu bytes, %s pages: process_vm_readv %.1f us, memcpy %.1f us\n", bytes,
              huge ? "huge" : "4 KiB", us(t1 - t0), us(t2 - t1));
}

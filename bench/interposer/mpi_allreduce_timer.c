/* An ordinary MPI benchmark of MPI_Allreduce (float sum, 4 B to 64 MiB), with no
 * knowledge of concord: run it as it is, and again with libconcord_mpi preloaded
 * (bench/interposer/compare). It calls nothing but MPI.
 *
 * It times the loop exactly as `concord-bench allreduce` times one implementation
 * (bench/allreduce/allreduce_bench.cpp), so that "interposed / concord-bench" compares the same
 * work and the difference is the interposer's own:
 * - buffers: 2 MiB-aligned, transparent huge pages asked for (madvise) from 2 MiB,
 *   zeroed before timing (first touch), as concord-bench's make_buffer. A plain
 *   malloc of 64 MiB is mmap'd memory 16 bytes past a page boundary on 4 KiB pages:
 *   unaligned vector loads and TLB misses that concord-bench never pays;
 * - warm-up: 100 calls up to 8 KiB, 10 above; timed: 1000 and 100 (OSU's counts);
 * - the timed calls in 4 rounds, each after an MPI_Barrier, the rounds' times summed;
 * - the time printed is the mean per call averaged over the ranks (concord-bench's
 *   avg_us), then the slowest rank's mean (its max_us);
 * - not in place, float, MPI_SUM, MPI_COMM_WORLD; MPI_Init_thread(MPI_THREAD_MULTIPLE)
 *   as concord-bench (concord's allreduce makes no MPI call per call on one host,
 *   so the level changes only the plain MPI baseline, which then matches
 *   concord-bench's `--impl mpi`).
 * Every size's result is checked in full after the timed calls (untimed), so a
 * wrong fast path shows.
 *
 * usage: mpi_allreduce_timer [min_bytes [max_bytes [iterations [warmup]]]]
 *   iterations/warmup override the per-size defaults (instruction counts with few
 *   calls: bench/interposer/callcost). */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { kHugePage = 2 << 20, kRounds = 4, kLargeMessage = 8192 };

static float* make_buffer(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, kHugePage, bytes) != 0) return NULL;
  if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 0, bytes);
  return p;
}

/* Mean µs per call over `iterations` calls of `count` floats, in kRounds
 * barrier-aligned rounds. */
static double time_calls(const float* send, float* recv, int count, int iterations) {
  double seconds = 0;
  for (int round = 0; round < kRounds; ++round) {
    const int n = iterations / kRounds + (round < iterations % kRounds ? 1 : 0);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < n; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    seconds += MPI_Wtime() - start;
  }
  return seconds / iterations * 1e6;
}

static int all_equal(const float* recv, int count, float want) {
  for (int i = 0; i < count; ++i)
    if (recv[i] != want) return 0;
  return 1;
}

int main(int argc, char** argv) {
  int provided, rank, size;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long min_bytes = argc > 1 ? atol(argv[1]) : 4;
  const long max_bytes = argc > 2 ? atol(argv[2]) : 64L << 20;
  const int fixed_iterations = argc > 3 ? atoi(argv[3]) : 0;
  const int fixed_warmup = argc > 4 ? atoi(argv[4]) : -1;
  float *send = NULL, *recv = NULL;
  if (min_bytes >= 4 && max_bytes >= min_bytes && max_bytes / 4 <= 0x7fffffffL &&
      fixed_iterations >= 0) {
    send = make_buffer((size_t)max_bytes);
    recv = make_buffer((size_t)max_bytes);
  }
  if (send == NULL || recv == NULL) {
    if (rank == 0)
      fprintf(stderr,
              "usage: mpi_allreduce_timer [min_bytes>=4 [max_bytes [iterations "
              "[warmup]]]] (or out of memory)\n");
    MPI_Finalize();
    return 2;
  }
  for (long i = 0; i < max_bytes / 4; ++i) send[i] = (float)(rank + 1);
  if (rank == 0) printf("# MPI_Allreduce float sum, %d ranks\n# bytes avg_us max_us\n", size);
  int wrong = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int count = (int)(bytes / 4);
    const int iterations = fixed_iterations         ? fixed_iterations
                           : bytes <= kLargeMessage ? 1000
                                                    : 100;
    const int warmup = fixed_warmup >= 0 ? fixed_warmup : bytes <= kLargeMessage ? 100 : 10;
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mean_us = time_calls(send, recv, count, iterations), sum = 0, slowest = 0;
    if (!all_equal(recv, count, (float)size * (size + 1) / 2)) wrong = 1;
    MPI_Reduce(&mean_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean_us, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.2f %.2f\n", bytes, sum / size, slowest);
    fflush(stdout);
  }
  if (wrong) fprintf(stderr, "rank %d: WRONG result\n", rank);
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong;
}

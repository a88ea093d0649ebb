/* An ordinary MPI benchmark of MPI_Allreduce (float sum, 4 B to 64 MiB), with no
 * knowledge of concord: run it as it is, and again with libconcord_mpi preloaded
 * (bench/interposer/compare). OSU-style: warm-up calls, then the mean time of
 * `iterations` calls per size, the slowest rank's, printed by rank 0 as
 * "bytes  avg_us". Each size checks one result, so a wrong fast path shows.
 *
 * usage: mpi_allreduce_timer [min_bytes [max_bytes]] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long min_bytes = argc > 1 ? atol(argv[1]) : 4;
  const long max_bytes = argc > 2 ? atol(argv[2]) : 64L << 20;
  if (min_bytes < 4 || max_bytes < min_bytes) {
    if (rank == 0) fprintf(stderr, "usage: mpi_allreduce_timer [min_bytes>=4 [max_bytes]]\n");
    MPI_Finalize();
    return 2;
  }
  float *send = malloc((size_t)max_bytes), *recv = malloc((size_t)max_bytes);
  for (long i = 0; i < max_bytes / 4; ++i) send[i] = (float)(rank + 1);
  memset(recv, 0, (size_t)max_bytes);
  if (rank == 0) printf("# MPI_Allreduce float sum, %d ranks\n# bytes avg_us\n", size);
  int wrong = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const int count = (int)(bytes / 4);
    /* concord-bench's (and OSU's) counts, so the two time the same loop */
    const int iterations = bytes <= 8192 ? 1000 : 100;
    const int warmup = iterations / 10;
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (recv[count - 1] != (float)size * (size + 1) / 2) wrong = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i)
      MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double elapsed = (MPI_Wtime() - start) / iterations * 1e6, slowest = 0;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%ld %.2f\n", bytes, slowest);
    fflush(stdout);
  }
  if (wrong) fprintf(stderr, "rank %d: WRONG result\n", rank);
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong;
}

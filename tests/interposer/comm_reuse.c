/* The interposer remembers, per thread, the last communicator handle it saw and its
 * concord Communicator (docs/MPI_INTERPOSER.md). This program gives it every chance
 * to use a stale answer: communicators freed and re-made (MPI hands the freed handle
 * to the next one) with a different membership each time (a split into halves, then
 * a duplicate of the whole world), an intercommunicator freed and replaced by an
 * intracommunicator, several live duplicates called in turn, and MPI_COMM_WORLD in
 * between. Every result is checked against a sum this program computes itself from
 * the membership it asked for. Plain C and plain MPI: run with and without the
 * interposer. Prints how often a freed handle came back, so a run shows that the
 * case it guards against did happen. Exit status 0 when every result matched. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { kRounds = 12, kLiveDups = 4, kCount = 33 };

static int rank, size;
static long failures;

/* Every element of every rank is rank + 1 + i, so the sum over a set of world
 * ranks is known without MPI. */
static void check_sum(MPI_Comm comm, long want_ranks_sum, int members, const char* what,
                      int round) {
  double send[kCount], recv[kCount];
  for (int i = 0; i < kCount; ++i) send[i] = rank + 1 + i;
  memset(recv, 0, sizeof recv);
  MPI_Allreduce(send, recv, kCount, MPI_DOUBLE, MPI_SUM, comm);
  for (int i = 0; i < kCount; ++i) {
    const double want = (double)want_ranks_sum + (double)members * (1 + i);
    if (recv[i] != want) {
      fprintf(stderr, "FAIL rank %d: %s, round %d, element %d: got %g, want %g\n", rank, what,
              round, i, recv[i], want);
      ++failures;
      return;
    }
  }
}

/* Sum and number of the world ranks with the same parity as `r` (a split by rank % 2). */
static void parity_group(int r, long* sum, int* members) {
  *sum = 0;
  *members = 0;
  for (int q = r % 2; q < size; q += 2) {
    *sum += q;
    ++*members;
  }
}

static int same_handle(MPI_Comm a, MPI_Comm b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

static void check_world(int round) {
  check_sum(MPI_COMM_WORLD, (long)size * (size - 1) / 2, size, "MPI_COMM_WORLD", round);
}

/* A split (half the ranks) and a duplicate (all of them), alternately, each freed
 * before the next is made. Returns how many rounds got the previous round's handle. */
static int freed_and_remade(void) {
  int reused = 0;
  MPI_Comm previous = MPI_COMM_NULL;
  for (int round = 0; round < kRounds; ++round) {
    MPI_Comm comm;
    long sum;
    int members;
    if (round % 2 == 0) {
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &comm);
      parity_group(rank, &sum, &members);
    } else {
      MPI_Comm_dup(MPI_COMM_WORLD, &comm);
      sum = (long)size * (size - 1) / 2;
      members = size;
    }
    if (round > 0 && same_handle(comm, previous)) ++reused;
    const char* what = round % 2 == 0 ? "a split freed and re-made" : "a dup freed and re-made";
    check_sum(comm, sum, members, what, round);
    check_sum(comm, sum, members, what, round); /* the remembered answer */
    if (round % 3 == 0) check_world(round);
    check_sum(comm, sum, members, what, round);
    previous = comm;
    MPI_Comm_free(&comm);
  }
  return reused;
}

/* An intercommunicator (even ranks | odd ranks; MPI passes it through: each side
 * gets the other side's sum) freed, then an intracommunicator that may get its
 * handle (concord takes it). Needs 2 ranks or more. */
static int inter_then_intra(void) {
  int reused = 0;
  for (int round = 0; round < 4; ++round) {
    MPI_Comm half, inter, intra;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter);
    long sum;
    int members;
    parity_group(rank + 1, &sum, &members); /* the other parity */
    check_sum(inter, sum, members, "an intercommunicator", round);
    check_sum(inter, sum, members, "an intercommunicator", round);
    const MPI_Comm freed = inter;
    MPI_Comm_free(&inter);
    MPI_Comm_dup(MPI_COMM_WORLD, &intra);
    if (same_handle(intra, freed)) ++reused;
    check_sum(intra, (long)size * (size - 1) / 2, size, "a dup after an intercommunicator", round);
    check_sum(intra, (long)size * (size - 1) / 2, size, "a dup after an intercommunicator", round);
    MPI_Comm_free(&intra);
    MPI_Comm_free(&half);
  }
  return reused;
}

/* Several live duplicates called in turn: the remembered one changes every call. */
static void live_duplicates(void) {
  MPI_Comm dups[kLiveDups];
  for (int d = 0; d < kLiveDups; ++d) MPI_Comm_dup(MPI_COMM_WORLD, &dups[d]);
  for (int round = 0; round < kRounds; ++round) {
    for (int d = 0; d < kLiveDups; ++d)
      check_sum(dups[(d + round) % kLiveDups], (long)size * (size - 1) / 2, size,
                "one of several live dups", round);
  }
  for (int d = 0; d < kLiveDups; ++d) MPI_Comm_free(&dups[d]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_world(-1);
  const int reused = freed_and_remade();
  const int inter_reused = size >= 2 ? inter_then_intra() : 0;
  live_duplicates();
  check_world(kRounds);

  long total = 0; /* the verdict does not depend on the interposer under test */
  PMPI_Allreduce(&failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf(
        "comm_reuse: %d ranks: a freed handle came back in %d of %d rounds (intercommunicator "
        "then dup: %d of %d): %ld failed checks\n",
        size, reused, kRounds - 1, inter_reused, size >= 2 ? 4 : 0, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}

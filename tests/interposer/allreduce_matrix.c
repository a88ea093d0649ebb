/* MPI_Allreduce the ways applications call it, checked against a reference this
 * program computes itself: every datatype the interposer takes x SUM/PROD/MIN/MAX
 * x a range of counts, in place and not, on MPI_COMM_WORLD and on duplicated and
 * split communicators freed and re-made in a loop; plus calls that must pass
 * through to MPI (user ops, a derived datatype with a user op, MAXLOC, bitwise ops,
 * unsupported types; neither MPICH nor Open MPI accepts predefined ops on derived types). Plain C
 * and plain MPI: run it with and without libconcord_mpi.
 *
 * usage: allreduce_matrix [--init plain|single|funneled|serialized|multiple]
 *                         [--uint8-minmax include|skip|only]
 * Exit status 0 when every result matched on every rank. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { SIGNED, UNSIGNED, FLOATING };
struct type {
  const char* name;
  MPI_Datatype mpi;
  size_t size;
  enum kind kind;
};
struct op {
  const char* name;
  MPI_Op mpi;
};

static struct type types[16];
static int n_types;
static const struct op ops[] = {{"sum", 0}, {"prod", 0}, {"min", 0}, {"max", 0}};
static MPI_Op op_handles[4];
static const int counts[] = {1, 3, 17, 1000, 65537};
static long failures;
static int uint8_minmax_mode; /* enum uint8_minmax, for the threads */

static void add_type(const char* name, MPI_Datatype mpi, size_t size, enum kind kind) {
  types[n_types].name = name;
  types[n_types].mpi = mpi;
  types[n_types].size = size;
  types[n_types].kind = kind;
  ++n_types;
}

static void init_tables(void) {
  add_type("MPI_FLOAT", MPI_FLOAT, sizeof(float), FLOATING);
  add_type("MPI_DOUBLE", MPI_DOUBLE, sizeof(double), FLOATING);
  add_type("MPI_INT", MPI_INT, sizeof(int), SIGNED);
  add_type("MPI_LONG", MPI_LONG, sizeof(long), SIGNED);
  add_type("MPI_LONG_LONG", MPI_LONG_LONG, sizeof(long long), SIGNED);
  add_type("MPI_INT64_T", MPI_INT64_T, 8, SIGNED);
  add_type("MPI_INT32_T", MPI_INT32_T, 4, SIGNED);
  add_type("MPI_INT8_T", MPI_INT8_T, 1, SIGNED);
  add_type("MPI_SIGNED_CHAR", MPI_SIGNED_CHAR, 1, SIGNED);
  add_type("MPI_UINT8_T", MPI_UINT8_T, 1, UNSIGNED);
  add_type("MPI_UNSIGNED_CHAR", MPI_UNSIGNED_CHAR, 1, UNSIGNED);
  op_handles[0] = MPI_SUM;
  op_handles[1] = MPI_PROD;
  op_handles[2] = MPI_MIN;
  op_handles[3] = MPI_MAX;
}

/* Element i of `rank`: integers, so every sum and product is exact in every
 * type; MIN/MAX values span the type's whole range (signedness and width bugs
 * show), SUM/PROD values stay small enough never to overflow at 3 ranks. */
static int64_t value(int rank, long i, const struct type* t, int op) {
  const int64_t h = (int64_t)((rank * 2654435761u + (uint64_t)i * 40503u) % 1000003u);
  if (op == 0) return t->kind == UNSIGNED ? h % 5 : h % 5 - 2;
  if (op == 1) return t->kind == UNSIGNED ? 1 + h % 2 : (h % 3 == 0 ? -1 : 1 + h % 2);
  if (t->size == 1) return t->kind == UNSIGNED ? h % 256 : h % 256 - 128;
  if (t->kind == FLOATING) return h - 500001; /* exact in float */
  if (t->size == 8) return (h - 500001) * ((int64_t)1 << 33);
  return (h - 500001) * 2000;
}

static void store(void* buf, long i, const struct type* t, int64_t v) {
  char* p = (char*)buf + i * (long)t->size;
  if (t->kind == FLOATING) {
    if (t->size == 4) {
      float f = (float)v;
      memcpy(p, &f, 4);
    } else {
      double d = (double)v;
      memcpy(p, &d, 8);
    }
  } else if (t->size == 1) {
    if (t->kind == UNSIGNED) {
      uint8_t u = (uint8_t)v;
      memcpy(p, &u, 1);
    } else {
      int8_t s = (int8_t)v;
      memcpy(p, &s, 1);
    }
  } else if (t->size == 4) {
    int32_t s = (int32_t)v;
    memcpy(p, &s, 4);
  } else {
    int64_t s = v;
    memcpy(p, &s, 8);
  }
}

static int64_t load(const void* buf, long i, const struct type* t) {
  const char* p = (const char*)buf + i * (long)t->size;
  if (t->kind == FLOATING) {
    if (t->size == 4) {
      float f;
      memcpy(&f, p, 4);
      return (int64_t)f;
    }
    double d;
    memcpy(&d, p, 8);
    return (int64_t)d;
  }
  if (t->size == 1) {
    if (t->kind == UNSIGNED) {
      uint8_t u;
      memcpy(&u, p, 1);
      return u;
    }
    int8_t s;
    memcpy(&s, p, 1);
    return s;
  }
  if (t->size == 4) {
    int32_t s;
    memcpy(&s, p, 4);
    return s;
  }
  int64_t s;
  memcpy(&s, p, 8);
  return s;
}

static int64_t reference(int size, long i, const struct type* t, int op) {
  int64_t acc = value(0, i, t, op);
  for (int r = 1; r < size; ++r) {
    const int64_t v = value(r, i, t, op);
    if (op == 0)
      acc += v;
    else if (op == 1)
      acc *= v;
    else if (op == 2)
      acc = v < acc ? v : acc;
    else
      acc = v > acc ? v : acc;
  }
  return acc;
}

/* One call, checked; returns 0 when right. */
static int check_one(MPI_Comm comm, const char* comm_name, const struct type* t, int op, int count,
                     int in_place) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  void* send = malloc((size_t)count * t->size);
  void* recv = malloc((size_t)count * t->size);
  for (long i = 0; i < count; ++i) {
    store(in_place ? recv : send, i, t, value(rank, i, t, op));
    if (!in_place) store(recv, i, t, -1);
  }
  int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, count, t->mpi, op_handles[op], comm);
  int bad = rc != MPI_SUCCESS;
  for (long i = 0; i < count && !bad; ++i) {
    const int64_t want = reference(size, i, t, op);
    const int64_t got = load(recv, i, t);
    if (got != want) {
      fprintf(stderr, "FAIL rank %d: %s %s count %d %s on %s: element %ld = %lld, expected %lld\n",
              rank, t->name, ops[op].name, count, in_place ? "in place" : "out of place", comm_name,
              i, (long long)got, (long long)want);
      bad = 1;
    }
  }
  if (rc != MPI_SUCCESS) fprintf(stderr, "FAIL rank %d: MPI_Allreduce returned %d\n", rank, rc);
  if (!in_place) { /* the send buffer is left alone */
    for (long i = 0; i < count && !bad; ++i)
      if (load(send, i, t) != value(rank, i, t, op)) {
        fprintf(stderr, "FAIL rank %d: %s %s: send buffer changed\n", rank, t->name, ops[op].name);
        bad = 1;
      }
  }
  free(send);
  free(recv);
  failures += bad;
  return bad;
}

enum uint8_minmax { INCLUDE, SKIP, ONLY };

static int selected(const struct type* t, int op, enum uint8_minmax mode) {
  const int uint8_minmax = t->kind == UNSIGNED && op >= 2;
  if (mode == SKIP) return !uint8_minmax;
  if (mode == ONLY) return uint8_minmax;
  return 1;
}

static void matrix(MPI_Comm comm, const char* name, enum uint8_minmax mode, int n_counts) {
  for (int ti = 0; ti < n_types; ++ti)
    for (int op = 0; op < 4; ++op) {
      if (!selected(&types[ti], op, mode)) continue;
      for (int c = 0; c < n_counts; ++c)
        for (int in_place = 0; in_place < 2; ++in_place)
          check_one(comm, name, &types[ti], op, counts[c], in_place);
    }
}

/* --- calls that must pass through to MPI ------------------------------------ */

static void pair_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const double* a = in;
  double* b = inout;
  for (int i = 0; i < 2 * *len; ++i) b[i] += a[i];
}

static void int_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] += a[i];
}

static void expect_long(long got, long want, const char* what, int rank) {
  if (got != want) {
    fprintf(stderr, "FAIL rank %d: %s = %ld, expected %ld\n", rank, what, got, want);
    ++failures;
  }
}

static void pass_through_calls(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const long sum_ranks = (long)size * (size - 1) / 2;

  MPI_Op user_sum; /* a user op on a type the interposer takes otherwise */
  MPI_Op_create(int_sum, 1, &user_sum);
  int x[100], y[100];
  for (int i = 0; i < 100; ++i) x[i] = rank + i;
  MPI_Allreduce(x, y, 100, MPI_INT, user_sum, comm);
  expect_long(y[99], sum_ranks + 99L * size, "user op sum", rank);
  MPI_Op_free(&user_sum);

  MPI_Datatype pair; /* a derived datatype, with a user op */
  MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
  MPI_Type_commit(&pair);
  MPI_Op pair_op;
  MPI_Op_create(pair_sum, 1, &pair_op);
  double p[8], q[8];
  for (int i = 0; i < 8; ++i) p[i] = rank * 10 + i;
  MPI_Allreduce(p, q, 4, pair, pair_op, comm);
  expect_long((long)q[7], sum_ranks * 10 + 7L * size, "derived datatype pair sum", rank);
  MPI_Op_free(&pair_op);

  MPI_Type_free(&pair);

  struct {
    int v, i;
  } mine = {rank * 3 % (size + 1), rank}, best;
  MPI_Allreduce(&mine, &best, 1, MPI_2INT, MPI_MAXLOC, comm);
  int want_v = -1, want_i = -1;
  for (int k = 0; k < size; ++k)
    if (k * 3 % (size + 1) > want_v) {
      want_v = k * 3 % (size + 1);
      want_i = k;
    }
  expect_long(best.v, want_v, "MAXLOC value", rank);
  expect_long(best.i, want_i, "MAXLOC index", rank);

  int bits = 1 << rank, all_bits = 0;
  MPI_Allreduce(&bits, &all_bits, 1, MPI_INT, MPI_BOR, comm);
  expect_long(all_bits, (1L << size) - 1, "BOR", rank);

  unsigned u = 3000000000u / (unsigned)size, usum = 0; /* a type concord does not have */
  MPI_Allreduce(&u, &usum, 1, MPI_UNSIGNED, MPI_SUM, comm);
  expect_long((long)usum, (long)(u * (unsigned)size), "MPI_UNSIGNED sum", rank);

  int zero_count = 5;
  MPI_Allreduce(MPI_IN_PLACE, &zero_count, 0, MPI_INT, MPI_SUM, comm);
  expect_long(zero_count, 5, "count 0 leaves the buffer alone", rank);
}

/* --- communicators made and freed in a loop --------------------------------- */

static void communicator_loop(enum uint8_minmax mode) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int round = 0; round < 6; ++round) {
    MPI_Comm dup, split;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &split); /* reversed order */
    const struct type* t = &types[round % n_types];
    for (int op = 0; op < 4; ++op) {
      if (!selected(t, op, mode)) continue;
      check_one(dup, "a duplicate of MPI_COMM_WORLD", t, op, counts[round % 5], round % 2);
      check_one(split, "a split of MPI_COMM_WORLD", t, op, counts[(round + 1) % 5], round % 2);
    }
    if (round == 0) pass_through_calls(split);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
  }
}

/* --- MPI_THREAD_MULTIPLE: two threads, each on its own communicator ---------- */

struct thread_job {
  MPI_Comm comm;
  int index;
};

static void* thread_main(void* arg) {
  struct thread_job* job = arg;
  for (int k = 0; k < 20; ++k) {
    const struct type* t = &types[(k + job->index) % n_types];
    const int op = k % 2 ? 0 : 3;
    if (!selected(t, op, (enum uint8_minmax)uint8_minmax_mode)) continue;
    check_one(job->comm, job->index ? "thread 1's communicator" : "thread 0's communicator", t, op,
              counts[k % 4], k % 3 == 0);
  }
  return NULL;
}

static void concurrent_threads(void) {
  struct thread_job jobs[2];
  pthread_t threads[2];
  for (int j = 0; j < 2; ++j) {
    MPI_Comm_dup(MPI_COMM_WORLD, &jobs[j].comm);
    jobs[j].index = j;
  }
  for (int j = 0; j < 2; ++j) pthread_create(&threads[j], NULL, thread_main, &jobs[j]);
  for (int j = 0; j < 2; ++j) pthread_join(threads[j], NULL);
  for (int j = 0; j < 2; ++j) MPI_Comm_free(&jobs[j].comm);
}

static int parse_level(const char* name) {
  if (!strcmp(name, "single")) return MPI_THREAD_SINGLE;
  if (!strcmp(name, "funneled")) return MPI_THREAD_FUNNELED;
  if (!strcmp(name, "serialized")) return MPI_THREAD_SERIALIZED;
  if (!strcmp(name, "multiple")) return MPI_THREAD_MULTIPLE;
  if (!strcmp(name, "plain")) return -1;
  fprintf(stderr,
          "allreduce_matrix: --init %s: expected plain, single, funneled, serialized "
          "or multiple\n",
          name);
  exit(2);
}

int main(int argc, char** argv) {
  int level = -1;
  enum uint8_minmax mode = INCLUDE;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--init") && i + 1 < argc) {
      level = parse_level(argv[++i]);
    } else if (!strcmp(argv[i], "--uint8-minmax") && i + 1 < argc) {
      const char* m = argv[++i];
      mode = !strcmp(m, "skip") ? SKIP : !strcmp(m, "only") ? ONLY : INCLUDE;
      if (mode == INCLUDE && strcmp(m, "include")) {
        fprintf(stderr, "allreduce_matrix: --uint8-minmax %s: expected include, skip or only\n", m);
        return 2;
      }
    } else {
      fprintf(stderr, "allreduce_matrix: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  uint8_minmax_mode = mode;
  int provided = -1;
  if (level < 0)
    MPI_Init(&argc, &argv);
  else
    MPI_Init_thread(&argc, &argv, level, &provided);
  init_tables();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  matrix(MPI_COMM_WORLD, "MPI_COMM_WORLD", mode, 5);
  if (mode != ONLY) {
    pass_through_calls(MPI_COMM_WORLD);
    communicator_loop(mode);
    if (provided == MPI_THREAD_MULTIPLE) concurrent_threads();
  }

  long total = 0; /* the verdict does not depend on the interposer under test */
  PMPI_Allreduce(&failures, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("allreduce_matrix: %d ranks, init %s (provided %d): %ld failed checks\n", size,
           level < 0 ? "MPI_Init" : "MPI_Init_thread", provided, total);
  MPI_Finalize();
  return total == 0 && failures == 0 ? 0 : 1;
}

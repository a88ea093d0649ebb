/* Works around an exit hang of MPICH 4.0.x (ch4:ucx) over UCX's TCP transport;
 * docs/SCALING.md ("The exit hang") has the stacks and the measurements.
 *
 * MPI_Finalize there closes every UCX endpoint in flush mode
 * (ucp_disconnect_nb), progresses until ucp_request_is_completed says every
 * close is done, and only then enters the PMI barrier, where a process no
 * longer progresses UCX. A flush that needs the peer's answer waits forever once
 * that peer has reached the barrier: one rank spins in ucp_worker_progress, the
 * others block reading the PMI socket.
 *
 * Preloaded (LD_PRELOAD) into the ranks, this keeps the flush-mode close but
 * gives it a deadline: a close still pending CONCORD_UCX_CLOSE_TIMEOUT_S
 * seconds (default 2) after finalize began is reported complete, so the rank
 * joins the barrier; UCX frees such a request when it does complete, and
 * ucp_worker_destroy tears the endpoint down. Nothing is lost: MPI requires
 * every message to be matched before MPI_Finalize. (A force close instead is
 * refused by UCX unless every endpoint was made with peer error handling,
 * which MPICH 4.0 does not ask for.) Other requests are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

typedef struct ucp_ep* ucp_ep_h;
typedef void* ucs_status_ptr_t;

#define EXPORT __attribute__((visibility("default")))

static void** closes; /* the close requests handed to MPICH */
static size_t n_closes, cap_closes;
static double first_close = -1.0;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double deadline_s(void) {
  const char* v = getenv("CONCORD_UCX_CLOSE_TIMEOUT_S");
  double s = v ? strtod(v, NULL) : 2.0;
  return s > 0 ? s : 2.0;
}

/* The real function: the next definition, or libucp's own where libmpich (and so
 * libucp) was loaded RTLD_LOCAL, as by a Python extension module. */
static void* real_symbol(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f) return f;
  void* ucp = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
  return ucp ? dlsym(ucp, name) : NULL;
}

static int is_close(void* request) {
  for (size_t i = 0; i < n_closes; ++i)
    if (closes[i] == request) return 1;
  return 0;
}

EXPORT ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  static ucs_status_ptr_t (*real)(ucp_ep_h);
  if (!real) real = (ucs_status_ptr_t(*)(ucp_ep_h))real_symbol("ucp_disconnect_nb");
  if (first_close < 0) first_close = now();
  ucs_status_ptr_t request = real(ep);
  /* A pointer past the error range is a request (UCS_PTR_IS_PTR). */
  if ((unsigned long)request > (unsigned long)-100L || request == NULL) return request;
  if (n_closes == cap_closes) {
    size_t cap = cap_closes ? 2 * cap_closes : 64;
    void** grown = realloc(closes, cap * sizeof *grown);
    if (!grown) return request; /* untracked: the plain behaviour */
    closes = grown;
    cap_closes = cap;
  }
  closes[n_closes++] = request;
  return request;
}

EXPORT int ucp_request_is_completed(void* request) {
  static int (*real)(void*);
  if (!real) real = (int (*)(void*))real_symbol("ucp_request_is_completed");
  if (real(request)) return 1;
  return first_close >= 0 && now() - first_close > deadline_s() && is_close(request);
}

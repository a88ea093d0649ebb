/* Works around an exit hang of MPICH 4.0.x (ch4:ucx) over UCX's TCP transport
 * (docs/SCALING.md, "The exit hang"). MPI_Finalize closes every UCX endpoint in
 * flush mode and progresses until all closes complete, and only then enters the
 * PMI barrier, where a process no longer progresses UCX. A close whose flush
 * needs the peer's answer then waits forever once that peer has reached the
 * barrier: one rank spins in ucp_worker_progress, the rest block in PMI.
 *
 * Preloaded (LD_PRELOAD) into the ranks, this replaces the deprecated
 * ucp_disconnect_nb that MPICH 4.0.x calls with a close that needs no answer
 * (UCP_EP_CLOSE_MODE_FORCE). That is safe at finalize: MPI requires every
 * message to have been matched before MPI_Finalize, so nothing a peer still
 * needs is in flight; UCX completes what is queued locally with a cancel. */
typedef struct ucp_ep* ucp_ep_h;
typedef void* ucs_status_ptr_t;

ucs_status_ptr_t ucp_ep_close_nb(ucp_ep_h ep, unsigned mode);

enum { kCloseModeForce = 0 }; /* UCP_EP_CLOSE_MODE_FORCE in <ucp/api/ucp.h> */

__attribute__((visibility("default"))) ucs_status_ptr_t ucp_disconnect_nb(ucp_ep_h ep) {
  return ucp_ep_close_nb(ep, kCloseModeForce);
}

"""The cost of each of concord's allreduce algorithms on a cluster, in the alpha-beta-gamma
model that bench/cluster_model.py fits, validates and predicts with (docs/SCALING.md, "The
model"). params hold the levels: "mpi" and "shm" (alpha, beta), "gamma"; a link is
{"alpha", "beta"}.
"""
import math

FLAT = ("ring", "recursive_doubling", "reduce_scatter_allgather")
ALGORITHMS = FLAT + ("hierarchical",)
# Typical links (alpha: one small-message MPI latency; beta: 1 / achievable bandwidth),
# with where the numbers come from; docs/SCALING.md repeats them.
LINKS = {
    "ib-hdr": {"alpha": 1.5e-6, "beta": 1 / 12.0e9,
               "about": "100 Gbit/s InfiniBand (HDR100): ~1.5 us MPI latency, ~12 GB/s (OSU)"},
    "eth-100g": {"alpha": 5e-6, "beta": 1 / 11.0e9,
                 "about": "100 Gbit/s Ethernet with RoCE: ~5 us, ~11 GB/s"},
    "eth-25g": {"alpha": 15e-6, "beta": 1 / 2.8e9,
                "about": "25 Gbit/s Ethernet over TCP: ~15 us, ~2.8 GB/s"},
}


# -- the cost of each algorithm, as (count of alpha, bytes at beta, bytes reduced) per level --

def _step(cost, hosts, r, distance, nbytes, params, link):
    """One exchange step of `nbytes` per rank with the partner `distance` ranks away
    (ranks numbered host by host): the time of its slowest hop."""
    if distance >= r and hosts > 1:
        # Every rank of the host crosses: their bytes share the host's link.
        return link["alpha"] + min(r, distance) * nbytes * link["beta"]
    return params["mpi"]["alpha"] + nbytes * params["mpi"]["beta"]


# concord's ring moves each block in segments of this many bytes (ring_segment_bytes),
# one message each.
RING_SEGMENT_BYTES = 256 * 1024


def flat_time(algorithm, hosts, r, n, params, link):
    p = hosts * r
    if p == 1:
        return 0.0
    g = params["gamma"]
    if algorithm == "ring":
        c = n / p
        segments = max(1, math.ceil(c / RING_SEGMENT_BYTES))
        net = segments * link["alpha"] + c * link["beta"] if hosts > 1 else 0.0
        intra = segments * params["mpi"]["alpha"] + c * params["mpi"]["beta"] if r > 1 else 0.0
        return 2 * (p - 1) * max(net, intra) + (p - 1) * c * g
    steps = int(math.floor(math.log2(p)))
    extra = p - 2 ** steps  # non-powers of two: one extra exchange in and out
    t = 0.0
    if extra:
        # Rank 2i folds into rank 2i+1, its neighbour: on another host where a host
        # has one rank (as in Hierarchical's step across hosts). Recursive doubling
        # folds the whole message in and out; reduce-scatter + allgather swaps halves,
        # each rank of a pair reducing one (allreduce_rabenseifner.cpp).
        fold = n if algorithm == "recursive_doubling" else n / 2
        t += 2 * _step(None, hosts, r, 1, fold, params, link) + fold * g
    if algorithm == "recursive_doubling":
        for k in range(steps):
            t += _step(None, hosts, r, 2 ** k, n, params, link) + n * g
        return t
    if algorithm == "reduce_scatter_allgather":
        for k in range(steps):  # halving from the farthest partner, then doubling back
            part = n / 2 ** (k + 1)
            d = 2 ** (steps - 1 - k)
            t += 2 * _step(None, hosts, r, d, part, params, link) + part * g
        return t
    raise ValueError(algorithm)


# Hierarchical's pieces across the network (CONCORD_HIERARCHICAL_PIECE_BYTES): a piece
# is this many bytes of every shard; 0 sends each shard in one step.
PIECE_BYTES = 1 << 20
# What handing one piece to the network thread adds: waking a thread on another core
# (a futex wake on a server, assumed; on this VM a submit-and-wait round trip took
# 8 us with both threads on one core and 80-100 us across its two vCPUs). A model's
# "piece_handoff_s" replaces it (cluster_model.py --handoff-us).
PIECE_HANDOFF_S = 20e-6


def node_phases(r, n, params):
    """The shared-memory reduce-scatter and allgather of n bytes in a host of r ranks."""
    if r == 1:
        return 0.0, 0.0
    shm = params["shm"]
    scatter = shm["alpha"] + n * shm["beta"] + n * (r - 1) / r * params["gamma"]
    return scatter, shm["alpha"] + n * shm["beta"]


def pipeline(scatter, gather, network):
    """The node's phases and the network steps of m pieces, in concord's order: this
    thread reduce-scatters piece k, queues its network step (one piece on the network
    thread at a time), waits for piece k-1's and allgathers it."""
    m = len(network)
    now = free = 0.0
    home = []
    for k in range(m):
        now += scatter / m
        free = max(now, free) + network[k]
        home.append(free)
        if k:
            now = max(now, home[k - 1]) + gather / m
    return max(now, home[-1]) + gather / m


def hierarchical_time(hosts, r, n, params, link, inter=None, piece_bytes=PIECE_BYTES,
                      owners=None):
    """Shared-memory reduce-scatter and allgather in the host, and each of `owners` local
    ranks (default r; 1: one leader, hierarchical_spread_bytes) allreducing its shard
    across the hosts at once (the host's link carries the whole message), with the flat
    algorithm `inter` (default: the fastest), in pieces of `piece_bytes` per shard that
    overlap the node's phases (0: one step, after the reduce-scatter and before the
    allgather)."""
    scatter, gather = node_phases(r, n, params)
    if hosts == 1:
        return scatter + gather
    owners = owners or r
    shared = dict(link, beta=link["beta"] * owners)  # the shards share the link
    options = [inter] if inter else FLAT
    shard = n / owners
    # With one rank per host there is nothing to overlap: concord sends the shard whole.
    m = max(1, math.ceil(shard / piece_bytes)) if piece_bytes and r > 1 else 1
    sizes = [min(piece_bytes, shard - k * piece_bytes) for k in range(m)] if m > 1 else [shard]
    handoff = params.get("piece_handoff_s", PIECE_HANDOFF_S) if m > 1 else 0.0
    network = [min(flat_time(a, hosts, 1, b, params, shared) for a in options) + handoff
               for b in sizes]
    return pipeline(scatter, gather, network)


def predict(algorithm, hosts, r, n, params, link, piece_bytes=PIECE_BYTES):
    if algorithm == "hierarchical":
        return hierarchical_time(hosts, r, n, params, link, piece_bytes=piece_bytes)
    return flat_time(algorithm, hosts, r, n, params, link)

"""docs/SCALING.md, "Non-power-of-two host counts": the model's step across hosts and
whole Hierarchical allreduce at 768 hosts x 8 ranks (not a power of two: 256 pairs
of leaders fold) against 1,024, with reduce-scatter + allgather's fold in halves (built) and with
the whole-vector fold it replaced (the same model plus the difference: n*beta + n/2*gamma
on the link, where a host has one rank), for typical links (the quiet fit's host levels,
gamma as predict takes it).

    python3 at_scale.py
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", ".."))
import cluster_costs as cc  # noqa: E402
import cluster_model as cm  # noqa: E402

R = 8
SIZES_MIB = (1, 4, 16)
halves_flat_time = cc.flat_time


def whole_fold_flat_time(algorithm, hosts, r, n, params, link):
    """The flat time with reduce-scatter + allgather folding the whole vector."""
    t = halves_flat_time(algorithm, hosts, r, n, params, link)
    p = hosts * r
    if algorithm != "reduce_scatter_allgather" or p & (p - 1) == 0:
        return t
    # Each fold step moves n where the halves move n/2 (one rank per host: the link).
    return t + n * link["beta"] + n / 2 * params["gamma"]


def across(hosts, n, model, link):
    """Hierarchical's step across hosts in one step: every local rank's shard at once."""
    shared = dict(link, beta=link["beta"] * R)
    return min(cc.flat_time(a, hosts, 1, n / R, model, shared) for a in cc.FLAT)


def times(hosts, n, model, link):
    return (across(hosts, n, model, link) * 1e3,
            cc.hierarchical_time(hosts, R, n, model, link, piece_bytes=0) * 1e3)


def main():
    model = cm.with_gamma(json.load(open(os.path.join(here, "..", "2026-11-24-quiet",
                                                      "model.json"))))
    print("| link | message | 1,024 hosts: across / whole ms | 768, whole fold: across / whole ms "
          "(× 1,024) | 768, halves: across / whole ms (× 1,024) |")
    print("|---|---:|---|---|---|")
    for name in ("eth-25g", "ib-hdr"):
        link = cm.LINKS[name]
        for n in (m << 20 for m in SIZES_MIB):
            base = times(1024, n, model, link)
            cc.flat_time = whole_fold_flat_time
            whole = times(768, n, model, link)
            cc.flat_time = halves_flat_time
            halves = times(768, n, model, link)
            cells = [f"{a:.1f} / {b:.1f} ({a / base[0]:.2f}× / {b / base[1]:.2f}×)"
                     for a, b in (whole, halves)]
            print(f"| {name} | {n >> 20} MiB | {base[0]:.1f} / {base[1]:.1f} | {cells[0]} | "
                  f"{cells[1]} |")


if __name__ == "__main__":
    main()

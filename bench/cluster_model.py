#!/usr/bin/env python3
"""An alpha-beta-gamma model of concord's allreduce algorithms on a cluster.

    cluster_model.py fit DIR -o model.json        fit the levels from concord-bench records
    cluster_model.py validate DIR --model model.json   predicted vs measured, with the error
    cluster_model.py predict --model model.json --link ib-hdr --ranks-per-host 8
    cluster_model.py summary DIR                  measured tables: latency by size, ratios
    cluster_model.py tune --model model.json --link eth-25g --hosts 512 --ranks-per-host 8 \\
        -o tuning.json                             a CONCORD_TUNING_FILE for that cluster

DIR holds concord-bench --json records named SHAPE_LINK.json (bench/cluster_bench writes
them): SHAPE is HOSTSxRANKS (2x2, 4x1, 1x2), LINK the link rate (1gbit, 10gbit, none).

Levels, each with a latency alpha (s per message) and a cost beta (s per byte):
  mpi   MPICH between two ranks of one host (the flat algorithms' intra-host hops)
  shm   concord's shared memory inside a host (Hierarchical's node phases)
  net   one host's link to the others (per link rate); ranks of a host share it
and gamma (s per byte reduced). The flat algorithms' cost is summed over their steps;
a step takes as long as its slowest hop, and a step where every rank of a host crosses
the network puts all of their bytes through that host's one link. The formulas are in
bench/cluster_costs.py; docs/SCALING.md explains them and what they leave out.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np

from cluster_costs import (  # noqa: F401 (the model's formulas, also for its tests)
    ALGORITHMS, FLAT, LINKS, PIECE_BYTES, PIECE_HANDOFF_S, flat_time, hierarchical_time,
    node_phases, pipeline, predict)


def parse_shape(text):
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m:
        raise SystemExit(f"cluster_model: shape '{text}' is not HOSTSxRANKS")
    return int(m.group(1)), int(m.group(2))


# -- fitting --------------------------------------------------------------------------

def load_runs(directory):
    runs = []
    for name in sorted(os.listdir(directory)):
        m = re.fullmatch(r"(\d+x\d+)_([a-z0-9]+)\.json", name)
        if not m:
            continue
        hosts, r = parse_shape(m.group(1))
        for rec in json.load(open(os.path.join(directory, name))):
            if rec.get("impl") != "concord" or rec.get("algorithm") in (None, "auto"):
                continue
            runs.append({"hosts": hosts, "r": r, "link": m.group(2), "algorithm": rec["algorithm"],
                         "bytes": rec["bytes"], "seconds": rec["avg_us"] * 1e-6})
    if not runs:
        raise SystemExit(f"cluster_model: no SHAPE_LINK.json records in {directory}")
    return runs


def _least_squares(rows, times):
    """Non-negative least squares on relative error (each row scaled by 1/time)."""
    a = np.array(rows, dtype=float) / np.array(times)[:, None]
    b = np.ones(len(times))
    free = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    while free:
        sol, *_ = np.linalg.lstsq(a[:, free], b, rcond=None)
        if (sol >= 0).all():
            x[free] = sol
            break
        free.pop(int(np.argmin(sol)))
    return x


def fit(runs):
    """mpi and gamma from one host's flat runs; shm from its Hierarchical runs; net
    per link from one-rank-per-host flat runs. Runs mixing levels (2x2) only validate."""
    one_host = [x for x in runs if x["hosts"] == 1]
    flat1 = [x for x in one_host if x["algorithm"] in FLAT]
    if not flat1:
        raise SystemExit("cluster_model: fit needs one-host runs (1xR) of the flat algorithms")
    rows, times = [], []
    for x in flat1:
        p, n = x["r"], x["bytes"]
        a, b, g = _coefficients(x["algorithm"], p, n)
        rows.append([a, b, g])
        times.append(x["seconds"])
    am, bm, g = _least_squares(rows, times)
    params = {"mpi": {"alpha": am, "beta": bm}, "gamma": g}
    hier = [x for x in one_host if x["algorithm"] == "hierarchical"]
    rows, times = [], []
    for x in hier:
        n, r = x["bytes"], x["r"]
        rows.append([2, 2 * n])
        times.append(x["seconds"] - n * (r - 1) / r * g)
    keep = [i for i, t in enumerate(times) if t > 0]
    sa, sb = _least_squares([rows[i] for i in keep], [times[i] for i in keep]) if keep else (0, 0)
    params["shm"] = {"alpha": sa, "beta": sb}
    params["net"] = {}
    for link in sorted({x["link"] for x in runs if x["hosts"] > 1 and x["r"] == 1}):
        sel = [x for x in runs if x["link"] == link and x["r"] == 1 and x["hosts"] > 1
               and x["algorithm"] in FLAT]
        rows, times = [], []
        for x in sel:
            a, b, gg = _coefficients(x["algorithm"], x["hosts"], x["bytes"])
            rows.append([a, b])
            times.append(max(x["seconds"] - gg * g, 1e-9))
        na, nb = _least_squares(rows, times)
        params["net"][link] = {"alpha": na, "beta": nb}
    return params


def _coefficients(algorithm, p, n):
    """(alpha count, beta bytes, gamma bytes) of a flat algorithm on p ranks over one
    kind of hop (so its time is linear in the level's parameters)."""
    one = {"mpi": {"alpha": 1.0, "beta": 0.0}, "gamma": 0.0}
    link = {"alpha": 1.0, "beta": 0.0}
    hosts, r = (p, 1)
    a = flat_time(algorithm, hosts, r, n, one, link)
    one_b = {"mpi": {"alpha": 0.0, "beta": 1.0}, "gamma": 0.0}
    b = flat_time(algorithm, hosts, r, n, one_b, {"alpha": 0.0, "beta": 1.0})
    one_g = {"mpi": {"alpha": 0.0, "beta": 0.0}, "gamma": 1.0}
    g = flat_time(algorithm, hosts, r, n, one_g, {"alpha": 0.0, "beta": 0.0})
    return a, b, g


# A reduction's cost where the fit could not separate it from the copies (gamma 0): one
# core's float32 add over memory-sized buffers, 7.5 GB/s (memcpy roofline, RESULTS.md at
# commit 5aa2ccf).
GAMMA_FALLBACK = 1 / 7.5e9


def with_gamma(model):
    # A fitted gamma well below one core's add is the fit failing to separate it
    # from the copies (every run reduces and copies the same bytes), not a cost.
    if model.get("gamma", 0) >= GAMMA_FALLBACK / 2:
        return model
    print(f"note: the fitted gamma is {model.get('gamma', 0):.2g} s/B, not separable; "
          f"using 1/{1 / GAMMA_FALLBACK / 1e9:.1f} GB/s "
          "(one core's float32 add, RESULTS.md at commit 5aa2ccf)\n", file=sys.stderr)
    return dict(model, gamma=GAMMA_FALLBACK)


def link_params(model, name):
    if name in LINKS:
        return LINKS[name]
    if name in model["net"]:
        return model["net"][name]
    raise SystemExit(f"cluster_model: link '{name}' is neither fitted ({', '.join(model['net'])})"
                     f" nor a typical one ({', '.join(LINKS)})")


# -- commands -------------------------------------------------------------------------

def cmd_fit(args):
    params = fit(load_runs(args.dir))
    params["fitted_from"] = os.path.abspath(args.dir)
    with open(args.output, "w") as f:
        json.dump(params, f, indent=1)
    print(json.dumps(params, indent=1))


def validate_rows(model, runs, piece_bytes=PIECE_BYTES):
    rows = []
    for x in runs:
        if x["link"] not in model["net"] and x["hosts"] > 1:
            continue
        link = model["net"].get(x["link"], {"alpha": 0, "beta": 0})
        t = predict(x["algorithm"], x["hosts"], x["r"], x["bytes"], model, link, piece_bytes)
        rows.append(dict(x, predicted=t, error=(t - x["seconds"]) / x["seconds"]))
    return rows


def cmd_validate(args):
    model = json.load(open(args.model))
    rows = validate_rows(model, load_runs(args.dir), args.piece_bytes)
    print("| shape | link | algorithm | bytes | measured us | predicted us | error |")
    print("|---|---|---|---:|---:|---:|---:|")
    for x in rows:
        if args.min_bytes <= x["bytes"]:
            print(f"| {x['hosts']}x{x['r']} | {x['link']} | {x['algorithm']} | {x['bytes']} | "
                  f"{x['seconds'] * 1e6:.1f} | {x['predicted'] * 1e6:.1f} | {x['error']:+.0%} |")
    print("\n| shape | link | points | median abs error | 90th percentile | median, >= 1 MiB |")
    print("|---|---|---:|---:|---:|---:|")
    groups = sorted({(x["hosts"], x["r"], x["link"]) for x in rows})
    for h, r, link in groups:
        group = [x for x in rows if (x["hosts"], x["r"], x["link"]) == (h, r, link)]
        e = [abs(x["error"]) for x in group]
        big = [abs(x["error"]) for x in group if x["bytes"] >= 1 << 20] or [float("nan")]
        print(f"| {h}x{r} | {link} | {len(e)} | {np.median(e):.0%} | {np.percentile(e, 90):.0%} "
              f"| {np.median(big):.0%} |")


def sizes(max_bytes):
    n, out = 4, []
    while n <= max_bytes:
        out.append(n)
        n *= 4
    return out


def load_model(args):
    """The fitted model, with gamma where the fit could not separate it and the node's
    shared-memory rate where --shm-rate replaces the fitted one."""
    model = with_gamma(json.load(open(args.model)))
    if getattr(args, "shm_rate", None):
        model = dict(model, shm=dict(model["shm"], beta=1 / (args.shm_rate * 1e9)))
    if getattr(args, "handoff_us", None) is not None:
        model = dict(model, piece_handoff_s=args.handoff_us * 1e-6)
    return model


def cmd_predict(args):
    model = load_model(args)
    link = link_params(model, args.link)
    r = args.ranks_per_host
    print(f"link {args.link}: alpha {link['alpha'] * 1e6:.2f} us, "
          f"{1 / link['beta'] / 1e9:.2f} GB/s; {link.get('about', 'fitted here')}")
    gamma_from = "fitted here" if model["gamma"] != GAMMA_FALLBACK else "one core's add"
    shm_from = "--shm-rate" if args.shm_rate else "fitted here"
    print(f"host: shm alpha {model['shm']['alpha'] * 1e6:.2f} us, beta^-1 "
          f"{_rate(model['shm']['beta'])} ({shm_from}); gamma^-1 {_rate(model['gamma'])} "
          f"({gamma_from})\n")
    print("| hosts | bytes | " + " | ".join(f"{a} us (busbw GB/s)" for a in ALGORITHMS)
          + " | best |")
    print("|---:|---:|" + "---:|" * len(ALGORITHMS) + "---|")
    for hosts in args.hosts:
        p = hosts * r
        for n in args.sizes or sizes(args.max_bytes):
            times = {a: predict(a, hosts, r, n, model, link, args.piece_bytes)
                     for a in ALGORITHMS}
            cells = [f"{t * 1e6:.1f} ({2 * (p - 1) / p * n / t / 1e9:.2f})" for t in times.values()]
            print(f"| {hosts} | {n} | " + " | ".join(cells) + f" | {min(times, key=times.get)} |")


def _rate(beta):
    return f"{1 / beta / 1e9:.2f} GB/s" if beta > 0 else "unbounded"


def cmd_summary(args):
    """Per shape and link: each implementation's latency by size (same run, interleaved),
    MPI_Allreduce / concord Auto, and the best flat algorithm / Hierarchical."""
    for name in sorted(os.listdir(args.dir)):
        if not re.fullmatch(r"\d+x\d+_[a-z0-9]+\.json", name):
            continue
        recs = json.load(open(os.path.join(args.dir, name)))
        by = {}
        for r in recs:
            key = r["algorithm"] if r["impl"] == "concord" else r["impl"]
            by.setdefault(r["bytes"], {})[key] = r["avg_us"]
        cols = [c for c in ALGORITHMS + ("auto", "mpi") if any(c in v for v in by.values())]
        print(f"\n### {name[:-5].replace('_', ' at ')}: latency in us\n")
        print("| bytes | " + " | ".join(cols) + " | mpi / auto | best flat / hierarchical |")
        print("|---:|" + "---:|" * (len(cols) + 2))
        for n in sorted(by):
            v = by[n]
            cells = [f"{v[c]:.0f}" if c in v else "" for c in cols]
            ratio = f"{v['mpi'] / v['auto']:.2f}" if "mpi" in v and "auto" in v else ""
            flat = [v[a] for a in FLAT if a in v]
            hier = f"{min(flat) / v['hierarchical']:.2f}" if flat and "hierarchical" in v else ""
            print(f"| {n} | " + " | ".join(cells) + f" | {ratio} | {hier} |")


# hierarchical_spread_bytes above any message: one leader per host crosses the network.
ONE_LEADER = 1 << 62


def spread_bytes(model, link_name):
    """Hierarchical's hierarchical_spread_bytes for a link: 0 (every rank of a host
    crosses the network with its shard, the built-in choice) unless the link is a
    fitted one that carries at most half of what one rank's flow moves by itself
    (the fitted unlimited veth, "none"): such a link is already full with one flow,
    and more flows only compete for it (on TCP at 1 Gbit/s one leader was faster,
    RESULTS.md at commit 5aa2ccf). Typical links are assumed fast enough to need
    every rank."""
    own, link = model["net"].get("none"), model["net"].get(link_name)
    if own and link and link["beta"] > 2 * own["beta"]:
        return ONE_LEADER
    return 0


# Recursive doubling sends the whole message at every step; the model prices that
# at no more than reduce-scatter + allgather's two half-size messages when latency
# is high, but measured across hosts here a full-message exchange stalled (4-16
# MiB at 2 x 2, 1 Gbit/s: 25 % slower than reduce-scatter + allgather, bench/
# RESULTS.md). Like MPICH and Open MPI, tune keeps it to short messages.
RECURSIVE_DOUBLING_MAX_BYTES = 1 << 20


# The piece sizes tune chooses from (0: one step), and the messages it weighs them on:
# fusion buckets and large tensors, where Hierarchical's network step is long enough
# to hide the node's phases behind.
PIECE_CHOICES = (0,) + tuple(1 << k for k in range(16, 24))  # 64 KiB .. 8 MiB
PIECE_MESSAGES = tuple(1 << k for k in range(20, 29, 2))  # 1, 4, 16, 64, 256 MiB


def piece_bytes(model, link, hosts, r, owners=None):
    """Hierarchical's piece size for a cluster: the one whose predicted times over
    PIECE_MESSAGES have the smallest geometric mean relative to each message's best
    choice. More pieces hide more of the node's phases but add the network step's
    latency terms once per piece (2 log2(hosts) of them in reduce-scatter + allgather)
    and a hand-off. `owners`: the ranks of a host that cross (default r; 1: one leader)."""
    if hosts < 2 or r < 2:
        return PIECE_BYTES  # nothing to overlap: the built-in value, unused
    times = {p: [hierarchical_time(hosts, r, n, model, link, piece_bytes=p, owners=owners)
                 for n in PIECE_MESSAGES] for p in PIECE_CHOICES}
    best = [min(t[i] for t in times.values()) for i in range(len(PIECE_MESSAGES))]

    def loss(p):
        return sum(math.log(t / b) for t, b in zip(times[p], best))
    return min(PIECE_CHOICES, key=loss)


def cmd_tune(args):
    """The Auto table for a cluster shape: Auto takes Hierarchical wherever ranks share a
    host, and Hierarchical's step across hosts asks the table for `hosts` ranks; so the
    rule for up to `hosts` ranks holds the best flat algorithm across hosts by size."""
    model = load_model(args)
    spread = spread_bytes(model, args.link)
    # The ranks of a host that cross the link: every one, or one leader for every message.
    owners = 1 if spread == ONE_LEADER else args.ranks_per_host
    link = dict(link_params(model, args.link))
    link["beta"] *= owners  # the host's shards share its link
    entries = []
    for n in [2 ** k for k in range(2, 31)]:
        times = {a: flat_time(a, args.hosts, 1, n, model, link) for a in FLAT
                 if a != "recursive_doubling" or n <= RECURSIVE_DOUBLING_MAX_BYTES}
        best = min(times, key=times.get)
        if entries and entries[-1]["algorithm"] == best:
            entries[-1]["max_bytes"] = n
        else:
            entries.append({"max_bytes": n, "algorithm": best})
    entries[-1]["max_bytes"] = None
    table = {
        "description": f"From the alpha-beta-gamma model ({args.model}) for {args.hosts} hosts x "
                       f"{args.ranks_per_host} ranks on link {args.link}",
        "command": "bench/cluster_model.py tune " + " ".join(sys.argv[2:]),
        "thresholds": {"hierarchical_spread_bytes": spread,
                       "hierarchical_piece_bytes": piece_bytes(
                           model, link_params(model, args.link), args.hosts, args.ranks_per_host,
                           owners)},
        "rules": [{"max_ranks": None, "algorithms": entries}],
    }
    with open(args.output, "w") as f:
        json.dump(table, f, indent=1)
    print(json.dumps(table, indent=1))


def node_options(parser):
    """What a host under load or a server's threads cost, where the fit cannot say."""
    parser.add_argument("--shm-rate", type=float, metavar="GB/s",
                        help="the node's shared-memory rate (1/beta) instead of the fitted one: "
                             "where the one-host fit is far from a host under the network's load "
                             "(docs/SCALING.md)")
    parser.add_argument("--handoff-us", type=float, metavar="US",
                        help="what handing a piece to the network thread costs "
                             f"(default {PIECE_HANDOFF_S * 1e6:.0f} us, assumed)")


def pieces_option(parser):
    parser.add_argument("--piece-bytes", type=int, default=PIECE_BYTES,
                        help="Hierarchical's pieces across the network, bytes of each shard, as "
                             "CONCORD_HIERARCHICAL_PIECE_BYTES (default %(default)s, concord's; "
                             "0: one step, as concord before 2026-11-25)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit")
    f.add_argument("dir")
    f.add_argument("-o", "--output", required=True)
    v = sub.add_parser("validate")
    v.add_argument("dir")
    v.add_argument("--model", required=True)
    v.add_argument("--min-bytes", type=int, default=0)
    pieces_option(v)
    p = sub.add_parser("predict")
    p.add_argument("--model", required=True)
    p.add_argument("--link", required=True)
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--hosts", type=lambda s: [int(x) for x in s.split(",")],
                   default=[2, 8, 64, 512, 4096])
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                   help="comma list of byte counts (default: 4 B to --max-bytes, x4)")
    pieces_option(p)
    node_options(p)
    s = sub.add_parser("summary")
    s.add_argument("dir")
    t = sub.add_parser("tune")
    t.add_argument("--model", required=True)
    t.add_argument("--link", required=True)
    t.add_argument("--hosts", type=int, required=True)
    t.add_argument("--ranks-per-host", type=int, default=8)
    t.add_argument("-o", "--output", required=True)
    node_options(t)
    args = ap.parse_args(argv)
    {"fit": cmd_fit, "validate": cmd_validate, "predict": cmd_predict, "tune": cmd_tune,
     "summary": cmd_summary}[
        args.command](args)


if __name__ == "__main__":
    main()

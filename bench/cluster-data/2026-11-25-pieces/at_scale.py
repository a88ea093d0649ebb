"""docs/SCALING.md, "Pieces at scale": Hierarchical's predicted time at 8 ranks per host
in one step, in the built-in 1 MiB pieces and in the piece size `cluster_model.py tune`
chooses, for typical links (the quiet fit's host levels, gamma as predict takes it).

    python3 at_scale.py [HANDOFF_US]      (default: the model's assumed hand-off)
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", ".."))
import cluster_model as cm  # noqa: E402

ROWS = {"ib-hdr": {2: (4, 64), 64: (4, 16, 64), 4096: (4, 64)},
        "eth-25g": {2: (4, 16, 256), 64: (16, 64), 4096: (16, 256)}}


def main(handoff_us=None):
    model = cm.with_gamma(json.load(open(os.path.join(here, "..", "2026-11-24-quiet",
                                                      "model.json"))))
    if handoff_us is not None:
        model["piece_handoff_s"] = handoff_us * 1e-6
    print("| link | hosts | tune's piece | message | one step ms | 1 MiB pieces ms (gain) "
          "| tune's pieces ms (gain) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, hosts_rows in ROWS.items():
        link = cm.LINKS[name]
        for hosts, mib in hosts_rows.items():
            chosen = cm.piece_bytes(model, link, hosts, 8)
            size = f"{chosen >> 20} MiB" if chosen >= 1 << 20 else f"{chosen >> 10} KiB"
            for n in (m << 20 for m in mib):
                t = [cm.hierarchical_time(hosts, 8, n, model, link, piece_bytes=p) * 1e3
                     for p in (0, cm.PIECE_BYTES, chosen)]
                print(f"| {name} | {hosts} | {size} | {n >> 20} MiB | {t[0]:.2f} | "
                      f"{t[1]:.2f} ({t[0] / t[1]:.2f}×) | {t[2]:.2f} ({t[0] / t[2]:.2f}×) |")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None)

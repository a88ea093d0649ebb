"""What the Python benchmarks' JSON records share: the commit they measured.

They time the installed concord package, which may have been built from
another commit than the checkout that holds these scripts (a `pip install` not
redone since): the record's "commit" is the package's own, and the scripts'
checkout is recorded beside it ("bench_commit") where the two differ."""
import os
import subprocess
import sys


def checkout_commit():
    """`git describe` of the tree this file is in ("-dirty" with uncommitted changes);
    outside a git checkout CONCORD_SOURCE_COMMIT (scripts/device-check sets it on
    the GPU node, whose copy has no .git), else "unknown"."""
    try:
        described = subprocess.run(["git", "describe", "--tags", "--always", "--dirty"],
                                   capture_output=True, text=True,
                                   cwd=os.path.dirname(os.path.abspath(__file__)),
                                   check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        described = ""
    return described or os.environ.get("CONCORD_SOURCE_COMMIT") or "unknown"


def provenance():
    """The record's commit fields: {"commit": the installed package's build
    commit}, with "bench_commit" (this checkout's) where it differs, which is
    also said on stderr once per record."""
    import concord
    built, here = concord.build_commit(), checkout_commit()
    if built == here:
        return {"commit": built}
    print(f"records: the installed concord was built from {built}, these benchmarks are at "
          f"{here}: the record names both (pip install . again to measure this checkout)",
          file=sys.stderr)
    return {"commit": built, "bench_commit": here}

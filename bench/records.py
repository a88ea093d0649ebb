"""What the Python benchmarks' JSON records share: the commit they measured."""
import os
import subprocess


def commit():
    """`git describe` of the tree this file is in ("-dirty" with uncommitted changes)."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                              text=True, cwd=os.path.dirname(os.path.abspath(__file__)),
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"

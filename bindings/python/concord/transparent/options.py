"""The transparent mode's command line (python -m concord.<backend>.run
[options] script args...), the same for every backend."""
from __future__ import annotations

import argparse


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def _parser(doc, prog, parts):
    ap = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=doc.split("\n", 2)[2])
    ap.add_argument("--per-rank-batch", action="store_true",
                    help="batch_size is per rank (weak scaling) instead of global")
    ap.add_argument("--compression", choices=("none", "fp16"), default="none",
                    help="gradients travel as float16 (fp16) and come back in their dtype")
    ap.add_argument("--accumulate", type=_positive, default=1, metavar="K",
                    help="backward passes per step: gradients are summed locally over K "
                         "batches and averaged over them and the ranks in one exchange, "
                         "then one optimizer step (K batches act as one K times larger)")
    for part in parts:
        ap.add_argument(f"--no-{part}", action="store_true", help=f"do not patch {part}")
    ap.add_argument("script", nargs="?", help="the training script (or -m MODULE)")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    return ap


def parse(argv, doc, prog, parts):
    """The options (o.script or o.module, o.args, o.no_<part> for each of
    `parts`, ...) from argv; `doc` (the runner's docstring) is the help."""
    ap = _parser(doc, prog, parts)
    # -m MODULE, as python takes it: the module and everything after it are the
    # program's, not ours.
    for i, a in enumerate(argv):
        if a == "-m":
            if i + 1 >= len(argv):
                ap.error("-m needs a module name")
            o = ap.parse_args(argv[:i])
            if o.script is not None:
                ap.error(f"give a script or -m MODULE, not both ({o.script!r} and -m)")
            o.module, o.args = argv[i + 1], argv[i + 2:]
            return o
        if not a.startswith("-"):
            break
    o = ap.parse_args(argv)
    if o.script is None:
        ap.error("a script (or -m MODULE) is required")
    o.module = None
    return o

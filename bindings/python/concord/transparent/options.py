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


# The runner's options that take a value: the next word (or after "=").
_VALUED = ("--compression", "--accumulate")


def _program_start(argv):
    """Where the program begins in argv, as python reads its own command line:
    at "-m" (a module), at "--" (the next word is the script, even one that
    looks like an option), or at the first word that is neither an option nor
    an option's value (the script); len(argv) where there is none."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-m", "--") or not a.startswith("-"):
            return i
        i += 2 if a in _VALUED else 1
    return len(argv)


def parse(argv, doc, prog, parts):
    """The options (o.script or o.module, o.args, o.no_<part> for each of
    `parts`, ...) from argv; `doc` (the runner's docstring) is the help. The
    words from the program on are the program's, as they are (a "--" among the
    script's arguments too), never ours."""
    ap = _parser(doc, prog, parts)
    i = _program_start(argv)
    o = ap.parse_args(argv[:i])
    o.script, o.module, o.args = None, None, []
    program = argv[i:]
    if program[:1] in (["-m"], ["--"]):
        if len(program) < 2:
            ap.error("-m needs a module name" if program[0] == "-m" else
                     "-- needs a script after it")
        if program[0] == "-m":
            o.module = program[1]
        else:
            o.script = program[1]
        o.args = program[2:]
    elif program:
        o.script, o.args = program[0], program[1:]
    else:
        ap.error("a script (or -m MODULE) is required")
    return o

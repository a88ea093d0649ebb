"""concordrun's reading of mpiexec's options: which take values, and the host lists,
hostfiles and environment options it checks and writes in the launcher's own spelling
(Hydra's or Open MPI's). Used by concord.launcher."""
import re

# The launchers' options that take values, and how many, by name: Hydra's (the match
# table of MPICH 4's ui/mpich/utils.c) and Open MPI's (mpirun --help all, 4.1). Both
# read -name and --name alike, Hydra -name=value too (_option_name). An option that
# takes a value and is missing here makes its value look like the program: the words
# after it then go to mpiexec as they are, a Python script without the transparent mode.
_VALUED = {
    # Hydra
    "genv": 2, "env": 2, "genvlist": 1, "envlist": 1, "f": 1, "hostfile": 1,
    "machinefile": 1, "machine": 1, "machines": 1, "machinelist": 1, "host": 1, "hosts": 1,
    "hostlist": 1, "ppn": 1, "prepend-pattern": 1, "outfile-pattern": 1,
    "errfile-pattern": 1, "outfile": 1, "errfile": 1, "wdir": 1, "configfile": 1,
    "launcher": 1, "launcher-exec": 1, "bootstrap": 1, "bootstrap-exec": 1, "rmk": 1,
    "topolib": 1, "binding": 1, "bind-to": 1, "map-by": 1, "membind": 1, "demux": 1,
    "iface": 1, "nameserver": 1, "order-nodes": 1, "localhost": 1, "usize": 1,
    "gpus-per-proc": 1, "rankmap": 1,
    # Open MPI
    "am": 1, "app": 1, "cf": 1, "cartofile": 1, "cpu-list": 1, "cpu-set": 1,
    "cpus-per-proc": 1, "cpus-per-rank": 1, "debugger": 1, "default-hostfile": 1,
    "gmca": 2, "H": 1, "hnp": 1, "launch-agent": 1, "max-restarts": 1, "max-vm-size": 1,
    "mca": 2, "N": 1, "npernode": 1, "npersocket": 1, "ompi-server": 1,
    "output-filename": 1, "path": 1, "personality": 1, "ppr": 1, "prefix": 1,
    "preload-files": 1, "rank-by": 1, "report-events": 1, "report-pid": 1,
    "report-uri": 1, "rf": 1, "rankfile": 1, "stdin": 1, "timeout": 1, "tune": 1, "wd": 1,
    "x": 1, "xml-file": 1, "xterm": 1}

# Host options, by the name without its dashes (-host, --host and -host=... alike);
# each is checked here so a typo fails before any host is contacted.
_HOSTS = ("-hosts", "-host", "-H", "-hostlist", "-machine", "-machines", "-machinelist")
_HOSTFILES = ("-f", "-hostfile", "-machinefile")
_HOST_ENTRY = re.compile(r"^[A-Za-z0-9_.\[\]:-]+?(:[0-9]+)?$")


def _check_host_entry(entry, where):
    """One "host" or "host:slots"; raises SystemExit naming what is wrong."""
    host, _, slots = entry.partition(":") if entry.count(":") == 1 else (entry, "", "")
    if not host or not _HOST_ENTRY.match(entry) or (slots and not slots.isdigit()):
        raise SystemExit(f"concordrun: {where}: '{entry}' is not a host or host:slots")
    if slots and int(slots) < 1:
        raise SystemExit(f"concordrun: {where}: '{entry}' has {slots} slots; it needs at least 1")


def _host_list(option, value):
    """-hosts/-host/-H value → Hydra's -hosts value (the same syntax), checked."""
    entries = value.split(",")
    if any(not e.strip() for e in entries):
        raise SystemExit(f"concordrun: {option} '{value}' has an empty host name")
    for e in entries:
        _check_host_entry(e.strip(), option)
    return ",".join(e.strip() for e in entries)


def _hostfile_entry(line, where):
    """One hostfile line, without its comment: "host" or "host:slots" (Hydra's syntax),
    or "host slots=N" (Open MPI's and horovodrun's); the entry as "host" or "host:N"."""
    host, *rest = line.split()
    key, _, slots = rest[0].partition("=") if len(rest) == 1 else ("", "", "")
    if rest and (key != "slots" or not slots.isdigit() or ":" in host):
        raise SystemExit(f"concordrun: {where}: '{line}' is not a host, host:slots or "
                         "host slots=N")
    entry = f"{host}:{slots}" if rest else host
    _check_host_entry(entry, where)
    return entry


def _check_hostfile(option, path):
    """A hostfile: one "host", "host:slots" or "host slots=N" per line, # comments;
    the entries, as "host" or "host:N", and whether Hydra reads the file as it is
    (no line in Open MPI's "slots=" syntax)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise SystemExit(f"concordrun: {option} {path}: cannot read it ({e.strerror})")
    hosts, hydra_syntax = [], True
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.append(_hostfile_entry(line, f"{path} line {number}"))
            hydra_syntax = hydra_syntax and len(line.split()) == 1
    if not hosts:
        raise SystemExit(f"concordrun: {option} {path} lists no host")
    return hosts, hydra_syntax


def _option_name(word):
    """An mpiexec option's name and the value in its word (None where there is none):
    Hydra and Open MPI read -name and --name alike, Hydra -name=value too."""
    name, equals, value = word.lstrip("-").partition("=")
    return name, (value if equals else None)


def _host_arguments(option, value, open_mpi):
    """A host list or hostfile option, checked, in the launcher's own spelling:
    Hydra's -hosts / -f, or Open MPI's --host host:slots,... A hostfile in the other
    launcher's syntax becomes a host list (Open MPI reads no "host:slots" line,
    Hydra no "slots=N")."""
    if option in _HOSTS:
        hosts = _host_list(option, value)
        return ["--host", hosts] if open_mpi else ["-hosts", hosts]
    entries, hydra_syntax = _check_hostfile(option, value)
    if open_mpi or not hydra_syntax:
        return ["--host" if open_mpi else "-hosts", ",".join(entries)]
    return [option, value]


# Environment options, in the launcher's own spelling: Hydra's -genv NAME VALUE and
# -genvlist A,B (these variables with the values they have here), Open MPI's -x NAME=VALUE
# and -x NAME (the same). Each launcher refuses the other's ("unknown option -genv").
_ENV_OPTIONS = ("genv", "genvlist", "x")


def _env_arguments(name, words, attached, open_mpi):
    """An environment option (words as given; attached: a -name=value word's value) in
    the launcher's spelling."""
    values = ([attached] if attached is not None else []) + words[1:]
    if name == "x" and not open_mpi:
        var, equals, value = values[0].partition("=")
        if not var:
            raise SystemExit(f"concordrun: {' '.join(words)}: expected -x NAME or -x NAME=VALUE")
        return ["-genv", var, value] if equals else ["-genvlist", var]
    if name == "genv" and open_mpi:
        return ["-x", f"{values[0]}={values[1]}"]
    if name == "genvlist" and open_mpi:
        return [word for var in values[0].split(",") if var for word in ("-x", var)]
    return words

"""concord.data on input that once went wrong without an error: a CSV line
with a '#', UTF-8 byte-order marks, corrupt compressed streams, label files
named by relative paths. Run under mpiexec at 1, 2 and 3 ranks like
test_data.py; every rank writes the same files into its own tmp_path, and the
expected samples are computed here with the csv module or numpy."""

import numpy as np
import pytest

import concord
from concord import data as cdata


def strided(total, rank, size):
    return list(range(rank, total, size))


def expect_error(fn, *words):
    with pytest.raises(cdata.DataError) as e:
        fn()
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def still_in_step(size):
    assert concord.allreduce(np.array([1.0]))[0] == size


def write_lines(path, lines, encoding="utf-8"):
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    return str(path)


@pytest.mark.parametrize("total", [2, 6])
@pytest.mark.parametrize("bad", ["#3,4,5,1", "3,4 # a note,5,1"])
def test_csv_hash_is_not_a_comment(comm_info, tmp_path, bad, total):
    """np.loadtxt's default comments='#' dropped a line starting with '#', and
    the fewer rows were broadcast over the share: with 2 samples in one
    process, sample 1 came back as a copy of sample 0, without an error."""
    rank, size = comm_info
    lines = ["a,b,c,label"] + [f"{i},{2 * i},{3 * i},{i % 2}" for i in range(total)]
    lines[2] = bad  # sample 1, line 3 of the file
    path = write_lines(tmp_path / "data.csv", lines)
    expect_error(cdata.open(path, label="label").read, "data.csv:3", "not a number")
    still_in_step(size)

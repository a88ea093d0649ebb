"""concord.data on input that once went wrong without an error: a CSV line
with a '#', UTF-8 byte-order marks, corrupt compressed streams, label files
named by relative paths. Run under mpiexec at 1, 2 and 3 ranks like
test_data.py; every rank writes the same files into its own tmp_path, and the
expected samples are computed here with the csv module or numpy."""

import csv

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


def csv_reference(paths, header):
    """(x, y) of every sample of `paths` (the last column the label), read with
    the csv module, which drops the byte-order mark ("utf-8-sig")."""
    rows = []
    for p in paths:
        with open(p, encoding="utf-8-sig", newline="") as f:
            rows += list(csv.reader(f))[1 if header else 0:]
    a = np.array(rows, dtype=np.float64)
    return a[:, :-1].astype(np.float32), a[:, -1].astype(np.int64)


@pytest.mark.parametrize("header", [False, True])
def test_csv_byte_order_mark(comm_info, tmp_path, header):
    """Files that start with a UTF-8 byte-order mark (Excel's "CSV UTF-8"):
    without a header the first sample was taken for one and lost (4 of 5
    samples); with one, its first column could not be named."""
    rank, size = comm_info
    paths = []
    for k in range(2):  # a directory of two such files, each with its mark
        lines = (["a,b,label"] if header else []) + [
            f"{i},{2 * i},{i % 3}" for i in range(5 * k, 5 * k + 5)]
        paths.append(write_lines(tmp_path / f"part{k}.csv", lines, encoding="utf-8-sig"))
    x_all, y_all = csv_reference(paths, header)
    r = cdata.open(str(tmp_path), label="label" if header else -1,
                   features=["a", "b"] if header else None)
    assert r.total == 10
    x, y = r.read()
    mine = strided(10, rank, size)
    np.testing.assert_array_equal(np.asarray(x), x_all[mine])
    np.testing.assert_array_equal(np.asarray(y), y_all[mine])

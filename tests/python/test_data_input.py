"""concord.data on input that once went wrong without an error: a CSV line
with a '#', UTF-8 byte-order marks, corrupt compressed streams, label files
named by relative paths. Run under mpiexec at 1, 2 and 3 ranks like
test_data.py; every rank writes the same files into its own tmp_path, and the
expected samples are computed here with the csv module or numpy."""

import csv
import gzip
import os
import struct
import zipfile
import zlib

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


def idx_gzip_with_bad_block(path, x):
    """An IDX file of x (float32) gzipped, with an invalid deflate block three
    quarters in: gzip raises zlib.error there."""
    raw = bytes([0, 0, 0x0D, x.ndim]) + b"".join(n.to_bytes(4, "big") for n in x.shape)
    raw += x.astype(">f4").tobytes()
    c, cut = zlib.compressobj(6, zlib.DEFLATED, -15), len(raw) * 3 // 4
    body = c.compress(raw[:cut]) + c.flush(zlib.Z_FULL_FLUSH) + b"\xff\xff\xff\xff"
    body += c.compress(raw[cut:]) + c.flush()
    with open(path, "wb") as f:
        f.write(b"\x1f\x8b\x08\0\0\0\0\0\0\xff" + body
                + struct.pack("<II", zlib.crc32(raw), len(raw)))
    return str(path)


def npz_with_bad_crc(path, x):
    """An uncompressed .npz of x whose member has one byte changed near its end:
    zipfile raises BadZipFile (bad CRC) on reaching the end of the member."""
    np.savez(path, x=x)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("x.npy")
    with open(path, "r+b") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
        f.seek(info.header_offset + 30 + name_len + extra_len + info.compress_size - 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    return str(path)


@pytest.mark.parametrize("kind", ["idx-gzip", "npz"])
def test_corrupt_compressed_data_reaches_every_rank(comm_info, tmp_path, kind):
    """zlib.error and BadZipFile are neither OSError nor ValueError: the rank
    that met them raised them as they were, and the other ranks waited for it
    in the error agreement until its process ended."""
    rank, size = comm_info
    x = np.arange(4000 * 8, dtype=np.float32).reshape(4000, 8)
    if kind == "npz":
        path, name = npz_with_bad_crc(tmp_path / "d.npz", x), "d.npz[x]"
    else:
        path = idx_gzip_with_bad_block(tmp_path / "x-idx2-float.gz", x)
        name = "x-idx2-float.gz"
    message = expect_error(cdata.open(path, shard="contiguous").read, name, "corrupt")
    if size > 1:
        assert f"(on rank {size - 1})" in message  # the last block holds the damage
    still_in_step(size)


def test_not_an_npz_names_the_file(comm_info, tmp_path):
    path = write_lines(tmp_path / "d.npz", ["not a zip file"])
    expect_error(lambda: cdata.open(path), "d.npz: not an .npz file")


def test_other_failure_on_one_rank_reaches_every_rank(comm_info, tmp_path, monkeypatch):
    """A failure that is not bad input (here a RuntimeError on the last rank
    alone) left the other ranks waiting in the agreement for ever; now it is
    agreed on: the failing rank raises its own exception, the others a
    DataError naming it."""
    rank, size = comm_info
    path = write_lines(tmp_path / "d.csv", ["a,label"] + [f"{i},0" for i in range(6)])
    r = cdata.open(path, label="label")
    if rank == size - 1:
        def boom(indices):
            raise RuntimeError("boom")
        monkeypatch.setattr(r._source, "read", boom)
        with pytest.raises(RuntimeError, match="boom"):
            r.read()
    else:
        expect_error(r.read, "RuntimeError: boom", f"(on rank {size - 1})")
    still_in_step(size)


@pytest.mark.parametrize("fmt", ["npy", "idx"])
def test_relative_label_file_is_next_to_the_features(comm_info, tmp_path, monkeypatch, fmt):
    """label="y..." for data/x...: the file next to the features file (DATA.md),
    not a file of that name in the working directory, which was taken first;
    both existing and different is an error."""
    rank, size = comm_info
    x, y = np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5, dtype=np.uint8)
    (tmp_path / "data").mkdir()
    names = ("x.npy", "y.npy") if fmt == "npy" else ("x-idx2-float", "y-idx1-ubyte")

    def save(path, a):
        if fmt == "npy":
            np.save(path, a)
        else:
            code = 0x0D if a.dtype == np.float32 else 0x08
            head = bytes([0, 0, code, a.ndim]) + b"".join(n.to_bytes(4, "big") for n in a.shape)
            path.write_bytes(head + a.astype(a.dtype.newbyteorder(">")).tobytes())
    save(tmp_path / "data" / names[0], x)
    save(tmp_path / "data" / names[1], y)
    monkeypatch.chdir(tmp_path)
    features = os.path.join("data", names[0])
    _, labels = cdata.open(features, label=names[1]).read()
    np.testing.assert_array_equal(np.asarray(labels), y[strided(5, rank, size)])
    save(tmp_path / names[1], y[::-1].copy())  # another file of that name in the working dir
    expect_error(lambda: cdata.open(features, label=names[1]), "names both")
    _, labels = cdata.open(features, label=os.path.join("data", names[1])).read()
    np.testing.assert_array_equal(np.asarray(labels), y[strided(5, rank, size)])


@pytest.mark.parametrize("bad", [-1, 2**63, 1.5])
def test_bad_shuffle_seed_fails_at_as_dataset_on_every_rank(comm_info, tmp_path, bad):
    """Rank 0's seed decides (the others pass a good one). -1 failed only when
    the dataset was iterated, inside tf.data; 2**63 raised OverflowError on rank
    0 alone while the others waited in the seed's broadcast."""
    pytest.importorskip("tensorflow")
    rank, size = comm_info
    np.save(tmp_path / "x.npy", np.arange(8, dtype=np.float32))
    r = cdata.open(str(tmp_path / "x.npy"))
    with pytest.raises(ValueError, match="seed must be an integer"):
        r.as_dataset(2 * size, seed=bad if rank == 0 else 1)
    still_in_step(size)
    assert len(list(r.as_dataset(2 * size, seed=2**63 - 1))) == 8 // (2 * size)


def test_unclear_messages_name_the_file_and_line(comm_info, tmp_path):
    """Messages that named no file: a gzipped CSV/.npy/HDF5 file ("'utf-8' codec
    can't decode byte 0x8b", "file signature not found"), CSV text that is not
    UTF-8, a value float() takes but loadtxt refuses ("could not convert string
    '1_000' to float64 at row 0", the row within a chunk), a file that is not HDF5."""
    rank, size = comm_info
    csv_text = b"a,b,label\n1,2,0\n3,4,1\n"
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress(csv_text))
    np.save(tmp_path / "v.npy", np.arange(4.0))
    (tmp_path / "v.npy.gz").write_bytes(gzip.compress((tmp_path / "v.npy").read_bytes()))
    for name in ("t.csv.gz", "v.npy.gz"):
        expect_error(lambda: cdata.open(str(tmp_path / name)), f"{name}: gzip-compressed")
    (tmp_path / "l1.csv").write_bytes(csv_text + b"5,6\xe9,1\n")  # Latin-1 on line 4
    expect_error(cdata.open(str(tmp_path / "l1.csv"), label="label").read, "l1.csv:4",
                 "not UTF-8")
    (tmp_path / "l2.csv").write_bytes(b"\xe9,b,label\n1,2,0\n")
    expect_error(lambda: cdata.open(str(tmp_path / "l2.csv")), "l2.csv:1", "not UTF-8")
    write_lines(tmp_path / "u.csv", ["a,label", "2,0", "1_000,1", "3,0"])
    expect_error(cdata.open(str(tmp_path / "u.csv"), label="label").read, "u.csv:3", "'1_000'",
                 "not a number")
    pytest.importorskip("h5py")
    (tmp_path / "n.h5").write_bytes(b"not hdf5")
    expect_error(lambda: cdata.open(str(tmp_path / "n.h5")), "n.h5: not a readable HDF5")
    still_in_step(size)


def test_csv_labels_too_large_for_int64_stay_float(comm_info, tmp_path):
    """Whole-number labels became int64 even when they do not fit: 1e20 came
    back as -9223372036854775808. Such labels now stay float (float32)."""
    rank, size = comm_info
    labels = [1e20, 3.0, 4.0]
    write_lines(tmp_path / "d.csv", ["a,label"] + [f"{i},{v!r}" for i, v in enumerate(labels)])
    _, y = cdata.open(str(tmp_path / "d.csv"), label="label").read()
    assert y.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), np.float32(labels)[strided(3, rank, size)])
    write_lines(tmp_path / "e.csv", ["a,label", "0,-3", "1,9007199254740992", "2,5"])
    _, y = cdata.open(str(tmp_path / "e.csv"), label="label").read()
    assert y.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(y), np.array([-3, 2**53, 5])[strided(3, rank, size)])


def test_csv_first_line_with_a_missing_value_is_not_a_header(comm_info, tmp_path):
    """header=None took "1,,0" (not all numbers) for a header: 2 samples of 3,
    without an error. It is data, and its empty field an error; pandas's header
    over an index column (",a,label") is still a header."""
    rank, size = comm_info
    path = write_lines(tmp_path / "miss.csv", ["1,,0", "2,3,1", "4,5,0"])
    r = cdata.open(path, label=-1)
    assert r.total == 3
    if rank == 0:  # the rank that holds sample 0 finds the bad field; every rank raises
        expect_error(r.read, "miss.csv:1", "'' in column '1' is not a number")
    else:
        expect_error(r.read, "miss.csv:1", "(on rank 0)")
    path = write_lines(tmp_path / "pandas.csv", [",a,label", "0,10,0", "1,11,1", "2,12,0"])
    x, y = cdata.open(path, label="label", features="a").read()
    expected = np.float32([10, 11, 12])[strided(3, rank, size)]
    np.testing.assert_array_equal(np.asarray(x)[:, 0], expected)
    still_in_step(size)


def test_glob_of_several_formats_is_an_error(comm_info, tmp_path):
    """A glob matching a.csv, b.csv and c.npy had the CSV reader read c.npy as
    text (an error about c.npy's bytes, from the rank holding them); it is now
    the directory's error, at open()."""
    rank, size = comm_info
    write_lines(tmp_path / "a.csv", ["a,label", "1,0", "2,1"])
    write_lines(tmp_path / "b.csv", ["a,label", "3,0"])
    np.save(tmp_path / "c.npy", np.arange(3.0))
    expect_error(lambda: cdata.open(str(tmp_path / "?.*"), label="label"),
                 "matches files of several formats (csv, npy)")
    x, y = cdata.open(str(tmp_path / "?.csv"), label="label").read()
    np.testing.assert_array_equal(np.asarray(y), np.array([0, 1, 0])[strided(3, rank, size)])
    still_in_step(size)


def test_hdf5_absolute_dataset_paths(comm_info, tmp_path):
    """features="/g/x" (h5py's absolute path for g/x) was refused: "no dataset
    named '/g/x' (it holds g/x, g/y)"."""
    h5py = pytest.importorskip("h5py")
    rank, size = comm_info
    x, y = np.arange(14, dtype=np.float32).reshape(7, 2), np.arange(7) % 3
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["g/x"], f["g/y"] = x, y
    got_x, got_y = cdata.open(str(tmp_path / "d.h5"), features="/g/x", label="/g/y").read()
    np.testing.assert_array_equal(np.asarray(got_x), x[strided(7, rank, size)])
    np.testing.assert_array_equal(np.asarray(got_y), y[strided(7, rank, size)])


def test_ranks_seeing_different_data_sets_is_an_error(comm_info, tmp_path):
    """Node-local copies of different lengths: every rank split its own total,
    so the shares overlapped or missed samples and the ranks ran different
    numbers of steps an epoch (5 and 6 for 20 and 24 samples)."""
    rank, size = comm_info
    n = 20 + 4 * rank  # tmp_path is this rank's own: its "local copy"
    np.save(tmp_path / "x.npy", np.arange(n, dtype=np.float32))
    if size == 1:
        assert cdata.open(str(tmp_path / "x.npy")).total == 20
        return
    expect_error(lambda: cdata.open(str(tmp_path / "x.npy")),
                 "the ranks see data sets of different sizes", "rank 0: 20", "rank 1: 24")
    still_in_step(size)


def test_directory_skips_hidden_files(comm_info, tmp_path):
    """macOS's AppleDouble file "._part0.csv" beside part0.csv was read as the
    directory's first CSV file ("no column named 'label' (the header has ...
    Mac OS X)"); a glob's "*" already skipped it."""
    rank, size = comm_info
    (tmp_path / "d").mkdir()
    write_lines(tmp_path / "d" / "part0.csv", ["a,label", "1,0", "2,1", "3,2"])
    (tmp_path / "d" / "._part0.csv").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    _, y = cdata.open(str(tmp_path / "d"), label="label").read()
    np.testing.assert_array_equal(np.asarray(y), np.array([0, 1, 2])[strided(3, rank, size)])

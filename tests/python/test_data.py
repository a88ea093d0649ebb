"""concord.data under mpiexec at 1, 2 and 3 ranks: every format's shares
partition the data set (checked against the indices each sample encodes and a
sharding reference computed here), shuffles agree across ranks and change per
epoch, and bad input raises the same error on every rank.

Every rank writes the same files into its own tmp_path (deterministic data)."""
import gzip
import os

import numpy as np
import pytest

import concord
from concord import data as cdata

TOTAL = 23  # not a multiple of 2 or 3: ranks hold different counts
FEATURES = 3


def samples(n=TOTAL):
    """x[i] = (i, 2i, 3i), y[i] = i % 5: every sample says which it is."""
    i = np.arange(n)
    return np.stack([i, 2 * i, 3 * i], axis=1).astype(np.float32), (i % 5).astype(np.int64)


def reference_share(total, rank, size, mode):
    if mode == "strided":
        return list(range(rank, total, size))
    sizes = [total // size + (1 if r < total % size else 0) for r in range(size)]
    start = sum(sizes[:rank])
    return list(range(start, start + sizes[rank]))


def gather(values):
    return concord.allgather(np.asarray(values, np.int64))


# -- writers: one per format, each returns open()'s arguments ------------------

def write_csv(d, x, y, sep=",", header=True):
    path = os.path.join(d, "data.tsv" if sep == "\t" else "data.csv")
    with open(path, "w") as f:
        if header:
            f.write(sep.join(["a", "b", "c", "label"]) + "\n")
        for row, lab in zip(x, y):
            f.write(sep.join(f"{v:g}" for v in row) + f"{sep}{lab}\n")
    return path, dict(label="label" if header else 3)


def write_csv_dir(d, x, y):
    """Three files (7 + 9 + 7 samples), in a directory, each with its header."""
    os.makedirs(os.path.join(d, "parts"))
    bounds = [0, 7, 16, len(x)]
    for k in range(3):
        with open(os.path.join(d, "parts", f"part{k}.csv"), "w") as f:
            f.write("a,b,c,label\n")
            for row, lab in zip(x[bounds[k]:bounds[k + 1]], y[bounds[k]:bounds[k + 1]]):
                f.write(",".join(f"{v:g}" for v in row) + f",{lab}\n\n")  # blank lines skipped
    return os.path.join(d, "parts"), dict(label=-1)


def write_npy(d, x, y):
    np.save(os.path.join(d, "x.npy"), x)
    np.save(os.path.join(d, "y.npy"), y)
    return os.path.join(d, "x.npy"), dict(label="y.npy")


def write_npz(d, x, y):
    np.savez_compressed(os.path.join(d, "d.npz"), images=x, labels=y)
    return os.path.join(d, "d.npz"), dict(label="labels")


def idx_bytes(a, code):
    head = bytes([0, 0, code, a.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in a.shape)
    return head + a.astype(a.dtype.newbyteorder(">")).tobytes()


def write_idx(d, x, y, gz=False):
    opener = gzip.open if gz else open
    suffix = ".gz" if gz else ""
    with opener(os.path.join(d, "x-idx2-float" + suffix), "wb") as f:
        f.write(idx_bytes(x.astype(np.float32), 0x0D))
    with opener(os.path.join(d, "y-idx1-ubyte" + suffix), "wb") as f:
        f.write(idx_bytes(y.astype(np.uint8), 0x08))
    return os.path.join(d, "x-idx2-float" + suffix), dict(label="y-idx1-ubyte" + suffix,
                                                          format="idx")


def write_hdf5(d, x, y):
    h5py = pytest.importorskip("h5py")
    path = os.path.join(d, "d.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("train/x", data=x, chunks=(4, FEATURES))
        f.create_dataset("train/y", data=y)
    return path, dict(features="train/x", label="train/y")


WRITERS = {
    "csv": write_csv,
    "csv-noheader": lambda d, x, y: write_csv(d, x, y, header=False),
    "tsv": lambda d, x, y: write_csv(d, x, y, sep="\t"),
    "csv-directory": write_csv_dir,
    "npy": write_npy,
    "npz": write_npz,
    "idx": write_idx,
    "idx-gzip": lambda d, x, y: write_idx(d, x, y, gz=True),
    "hdf5": write_hdf5,
}


@pytest.mark.parametrize("mode", ["strided", "contiguous"])
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_shares_partition_the_data_set(comm_info, tmp_path, fmt, mode):
    rank, size = comm_info
    x, y = samples()
    path, kwargs = WRITERS[fmt](str(tmp_path), x, y)
    r = cdata.open(path, shard=mode, **kwargs)
    xr, yr = r.read()
    assert r.total == TOTAL and len(r) == len(xr) == len(yr)
    assert list(r.indices) == reference_share(TOTAL, rank, size, mode)
    np.testing.assert_array_equal(xr, x[r.indices])  # the samples are the ones it names
    np.testing.assert_array_equal(yr, y[r.indices])
    assert cdata.is_sharded(xr) and cdata.is_sharded(yr)
    everyone = gather(xr[:, 0].astype(np.int64))
    assert sorted(everyone) == list(range(TOTAL))  # each sample once, none missing


def test_glob_and_no_labels(comm_info, tmp_path):
    rank, size = comm_info
    x, y = samples()
    write_csv_dir(str(tmp_path), x, y)
    r = cdata.open(str(tmp_path / "parts" / "part*.csv"), features=["a", "c"])
    xr, yr = r.read()
    assert yr is None and xr.shape == (len(r), 2)
    np.testing.assert_array_equal(xr, x[r.indices][:, [0, 2]])


def reference_epochs(total, size, seed, epoch, per_rank, mode):
    """The global batches every rank's batches must add up to: whole rows
    (local position j of every rank) shuffled by default_rng([seed, epoch]),
    the partial last row last, a last batch of only partial rows merged."""
    shares = [reference_share(total, r, size, mode) for r in range(size)]
    full, rows = total // size, -(-total // size)
    order = list(np.random.default_rng([seed, epoch]).permutation(full)) + list(range(full, rows))
    chunks = [order[i:i + per_rank] for i in range(0, rows, per_rank)]
    if len(chunks) > 1 and min(chunks[-1]) >= full:
        chunks[-2:] = [chunks[-2] + chunks[-1]]
    return [sorted(s[j] for s in shares for j in c if j < len(s)) for c in chunks]


# 21 at 2 ranks and 19 at 3 end in a batch of only the partial row (it joins the one before)
@pytest.mark.parametrize("total", [TOTAL, 21, 19])
@pytest.mark.parametrize("mode", ["strided", "contiguous"])
def test_shuffles_agree_across_ranks_and_change_per_epoch(comm_info, tmp_path, mode, total):
    tf = pytest.importorskip("tensorflow")
    rank, size = comm_info
    x, y = samples(total)
    path, kwargs = write_npy(str(tmp_path), x, y)
    r = cdata.open(path, shard=mode, **kwargs)
    batch = 2 * size
    seed = 1234 + rank  # rank 0's seed is taken everywhere
    ds = r.as_dataset(batch, shuffle=True, seed=seed)
    epochs, own = [], []
    for epoch in range(3):  # iterating the same dataset again is the next epoch
        mine = [xb[:, 0].numpy().astype(np.int64) for xb, _ in ds]
        steps = gather([len(mine)])
        assert len(set(steps.tolist())) == 1  # every rank runs the same number of steps
        assert all(len(b) for b in mine)  # no empty batch
        batches = [sorted(gather(b).tolist()) for b in mine]
        assert batches == reference_epochs(total, size, 1234, epoch, 2, mode)
        assert sorted(sum(batches, [])) == list(range(total))
        epochs.append(batches)
        own.append(mine)
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2]  # a new order every epoch
    for xb, yb in ds.take(2):  # labels travel with their samples
        np.testing.assert_array_equal(yb.numpy(), xb[:, 0].numpy().astype(np.int64) % 5)
    assert tf.data.experimental.cardinality(ds).numpy() == len(own[0])
    # Autotuning off: its thread made an epoch's end wait 1-5 s (docs/DATA.md, "The pipeline")
    assert ds.options().autotune.enabled is False
    for epoch in range(3):  # epoch_indices() names the batches as_dataset() yields
        named = r.epoch_indices(epoch, batch, 1234)
        assert [b.tolist() for b in named] == [b.tolist() for b in own[epoch]]
    unshuffled = [xb[:, 0].numpy().astype(np.int64).tolist()
                  for xb, _ in r.as_dataset(batch, shuffle=False)]
    assert sum(unshuffled, []) == list(r.indices)


def test_dataset_keeps_dtypes_shapes_and_counts_partial_epochs(comm_info):
    """What fit() gets from a reader's arrays (x, y and sample weights): each
    array's dtype and sample shape, and the reference's global batches; an
    epoch left after one batch still counts, and one never started does not."""
    tf = pytest.importorskip("tensorflow")
    from concord.data import _tf as data_tf
    rank, size = comm_info
    total = 19
    mine = np.array(reference_share(total, rank, size, "strided"))
    x = np.repeat(mine.astype(np.float16), 6).reshape(-1, 2, 3)  # 2x3 samples, all = index
    y = (mine % 7).astype(np.uint8)
    w = mine.astype(np.float64) / 2
    ds = data_tf.array_dataset(x, y, w, 2 * size, shuffle=True, seed=77 + rank)

    def epoch():
        got = [[t.numpy() for t in e] for e in ds]
        for xb, yb, wb in got:
            assert xb.dtype == np.float16 and xb.shape[1:] == (2, 3)
            assert yb.dtype == np.uint8 and wb.dtype == np.float64
            index = xb[:, 0, 0].astype(np.int64)
            assert (xb == xb[:, :1, :1]).all()  # every value of a sample travels with it
            np.testing.assert_array_equal(yb, index % 7)
            np.testing.assert_array_equal(wb, index / 2)
        return [sorted(gather(b[0][:, 0, 0].astype(np.int64)).tolist()) for b in got]

    assert epoch() == reference_epochs(total, size, 77, 0, 2, "strided")
    next(iter(ds))  # epoch 1: one batch taken, the rest left
    iter(ds)  # an iterator never read from draws no epoch
    assert epoch() == reference_epochs(total, size, 77, 2, 2, "strided")
    assert tf.data.experimental.cardinality(ds).numpy() == len(reference_epochs(
        total, size, 77, 0, 2, "strided"))


def test_sample_weight_without_labels_is_an_error(comm_info):
    pytest.importorskip("tensorflow")
    from concord.data import _tf as data_tf
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="sample_weight without y"):
        data_tf.array_dataset(x, None, np.ones(4), 2 * comm_info[1], shuffle=False)


def test_dataset_without_labels_yields_one_tuples(comm_info, tmp_path):
    rank, size = comm_info
    x, y = samples()
    np.save(str(tmp_path / "x.npy"), x)
    r = cdata.open(str(tmp_path / "x.npy"))
    got = [e for e in r.as_dataset(2 * size, shuffle=False)]
    assert all(isinstance(e, tuple) and len(e) == 1 for e in got)
    assert sum((e[0][:, 0].numpy().astype(np.int64).tolist() for e in got), []) == list(r.indices)


def test_strided_batches_are_a_single_process_run(comm_info, tmp_path):
    """Unshuffled, strided: global batch k is samples k*B .. k*B+B-1, as in
    one process (and as the transparent mode's strided split)."""
    rank, size = comm_info
    x, y = samples(6 * size * 3)
    path, kwargs = write_npy(str(tmp_path), x, y)
    r = cdata.open(path, **kwargs)
    for k, (xb, _) in enumerate(r.as_dataset(6 * size, shuffle=False)):
        got = sorted(gather(xb[:, 0].numpy().astype(np.int64)).tolist())
        assert got == list(range(k * 6 * size, (k + 1) * 6 * size))


# -- errors: the same DataError on every rank ---------------------------------

def expect_error(fn, *words):
    """fn raises a DataError with `words` in its message (file names without
    their directory: every rank has its own tmp_path)."""
    with pytest.raises(cdata.DataError) as e:
        fn()
    for w in words:
        assert w in str(e.value), str(e.value)
    return str(e.value)


def test_ragged_csv_row_names_file_and_line(comm_info, tmp_path):
    x, y = samples()
    path, kwargs = write_csv(str(tmp_path), x, y)
    lines = open(path).read().splitlines()
    lines[18] += ",7"  # sample 17, line 19 of the file
    open(path, "w").write("\n".join(lines) + "\n")
    r = cdata.open(path, **kwargs)
    expect_error(r.read, "data.csv:19", "5 fields, expected 4")


def test_non_number_in_csv(comm_info, tmp_path):
    x, y = samples()
    path, kwargs = write_csv(str(tmp_path), x, y)
    lines = open(path).read().splitlines()
    lines[5] = "1,2,x3,0"
    open(path, "w").write("\n".join(lines) + "\n")
    expect_error(cdata.open(path, **kwargs).read, "data.csv:6", "'x3'", "'c'")


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_idx(comm_info, tmp_path, gz):
    x, y = samples()
    path, kwargs = write_idx(str(tmp_path), x, y, gz=gz)
    raw = idx_bytes(x.astype(np.float32), 0x0D)[:-5]  # the last record cut short
    with (gzip.open if gz else open)(path, "wb") as f:
        f.write(raw)
    if gz:
        expect_error(lambda: cdata.open(path, shard="contiguous", **kwargs).read(),
                     os.path.basename(path), "truncated", f"record {TOTAL - 1} of {TOTAL}")
    else:
        expect_error(lambda: cdata.open(path, **kwargs), os.path.basename(path), "truncated",
                     f"record {TOTAL - 1}")


def test_mismatched_sample_counts(comm_info, tmp_path):
    x, y = samples()
    path, kwargs = write_npy(str(tmp_path), x, y[:-1])
    expect_error(lambda: cdata.open(path, **kwargs), "mismatched sample counts", "x.npy",
                 "y.npy", str(TOTAL), str(TOTAL - 1))


def test_missing_hdf5_dataset(comm_info, tmp_path):
    x, y = samples()
    path, _ = write_hdf5(str(tmp_path), x, y)
    expect_error(lambda: cdata.open(path, features="train/x", label="train/labels"), "d.h5",
                 "'train/labels'", "train/y")


def test_missing_npz_array_and_csv_column(comm_info, tmp_path):
    x, y = samples()
    path, _ = write_npz(str(tmp_path), x, y)
    expect_error(lambda: cdata.open(path, label="y"), "d.npz", "'y'", "images, labels")
    csv_path, _ = write_csv(str(tmp_path), x, y)
    expect_error(lambda: cdata.open(csv_path, label="species"), "'species'", "a, b, c, label")


def test_pattern_matching_no_file(comm_info, tmp_path):
    expect_error(lambda: cdata.open(str(tmp_path / "nothing*.csv")), "no file matches")
    expect_error(lambda: cdata.open(str(tmp_path / "missing.npy")), "no such file")


def test_error_on_one_rank_reaches_every_rank(comm_info, tmp_path):
    """Only the rank holding the bad row parses it; every rank raises."""
    rank, size = comm_info
    x, y = samples()
    path, kwargs = write_csv(str(tmp_path), x, y)
    lines = open(path).read().splitlines()
    lines[TOTAL] = "1,2"  # the last sample: contiguous, it is the last rank's
    open(path, "w").write("\n".join(lines) + "\n")
    message = expect_error(cdata.open(path, shard="contiguous", **kwargs).read,
                           f"data.csv:{TOTAL + 1}")
    if size > 1:
        assert f"(on rank {size - 1})" in message
    after = concord.allreduce(np.array([1.0]))  # every rank still in step
    assert after[0] == size


@pytest.mark.parametrize("mode", ["strided", "contiguous"])
def test_hdf5_large_samples_strided_hyperslabs(comm_info, tmp_path, mode):
    """Samples of 64 KiB and more are read as strided hyperslabs (only this
    rank's samples leave the file)."""
    h5py = pytest.importorskip("h5py")
    rank, size = comm_info
    n, width = 300, 16384  # 64 KiB a sample: 19 MiB, over one 16 MiB window at 1 rank
    path = str(tmp_path / "big.h5")
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", (n, width), np.float32, chunks=(1, width))
        for i in range(n):
            d[i] = np.full(width, i, np.float32)
    r = cdata.open(path, features="x", shard=mode)
    xr, yr = r.read()
    assert yr is None and list(r.indices) == reference_share(n, rank, size, mode)
    np.testing.assert_array_equal(xr, np.repeat(r.indices[:, None], width, 1).astype(np.float32))
    assert sorted(gather(xr[:, 0].astype(np.int64))) == list(range(n))


def test_directory_of_mixed_formats_and_misplaced_options(comm_info, tmp_path):
    x, y = samples()
    write_csv(str(tmp_path), x, y)
    write_npy(str(tmp_path), x, y)
    expect_error(lambda: cdata.open(str(tmp_path)), "several formats", "csv, npy")
    r = cdata.open(str(tmp_path), format="csv", label="label")  # only the CSV file
    assert r.total == TOTAL
    expect_error(lambda: cdata.open(str(tmp_path / "x.npy"), dtype="float64"),
                 "dtype apply to CSV/TSV only")

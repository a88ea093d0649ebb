"""The "concord" torch.distributed backend's errors: bad arguments get an error
naming what was wrong, on every rank alike where every rank passes them, and the
group goes on working after; and how the backend refuses a launcher it cannot
serve (torchrun)."""
import pytest
import torch
import torch.distributed as dist


def test_unsupported_call_names_itself(group):
    with pytest.raises(NotImplementedError, match="concord: reduce is not supported"):
        dist.reduce(torch.ones(3), dst=0)


def test_bool_allreduce_is_a_type_error(group):
    with pytest.raises(TypeError, match="cannot reduce tensors of dtype Bool"):
        dist.all_reduce(torch.ones(3, dtype=torch.bool))


@pytest.mark.parametrize("premul", [False, True], ids=["sum", "premul_sum"])
@pytest.mark.parametrize("direct", [False, True], ids=["engine", "direct"])
def test_counts_that_differ_fail_on_every_rank(make_group, direct, premul):
    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    g = None if direct else make_group(direct=False)
    t = torch.ones(10 + dist.get_rank())
    # PREMUL_SUM's factor must not reach the caller's tensor of a call that fails.
    op = dist._make_nccl_premul_sum(3.0) if premul else dist.ReduceOp.SUM
    # The direct path's checked exchange words it one way, the engine another.
    match = "ranks disagree: rank 1 passed count=11" if direct else "ranks submitted it differently"
    with pytest.raises(ValueError, match=match):
        dist.all_reduce(t, op=op, group=g)
    assert torch.equal(t, torch.ones(10 + dist.get_rank()))  # nothing moved
    # The group goes on working afterwards.
    t = torch.ones(4)
    dist.all_reduce(t, group=g)
    assert torch.equal(t, torch.full((4,), float(dist.get_world_size())))
    if g is not None:
        dist.destroy_process_group(g)


# Pairs of dtypes of one element size: as bytes they would pass for each other.
SAME_SIZE = [(torch.float32, torch.int32), (torch.float16, torch.bfloat16),
             (torch.float64, torch.int64), (torch.int8, torch.uint8)]


@pytest.mark.parametrize("dtypes", SAME_SIZE, ids=lambda d: f"{d[0]}-{d[1]}")
def test_dtypes_of_one_size_that_differ_fail_the_moving_collectives_on_every_rank(group, dtypes):
    size, rank = dist.get_world_size(), dist.get_rank()
    if size == 1:
        pytest.skip("needs two ranks")
    dtype = dtypes[0] if rank == 0 else dtypes[1]

    def mine():
        return torch.full((size * 2,), rank + 1).to(dtype)

    calls = {
        "broadcast": lambda t, out: dist.broadcast(t, src=1),
        "all_gather_into_tensor": lambda t, out: dist.all_gather_into_tensor(out, t),
        "all_gather": lambda t, out: dist.all_gather(list(out.chunk(size)), t),
        "all_to_all_single": lambda t, out: dist.all_to_all_single(out[:size * 2], t),
    }
    for name, call in calls.items():
        t, out = mine(), torch.zeros(size * size * 2, dtype=dtype)
        with pytest.raises(ValueError, match="ranks submitted it differently"):
            call(t, out)
        # Nothing moved: no rank took another's bytes for its own dtype.
        assert torch.equal(t, mine()), name
        assert torch.equal(out, torch.zeros(size * size * 2, dtype=dtype)), name
    # The group goes on working afterwards.
    t = torch.full((3,), rank + 1).to(dtypes[1])
    dist.broadcast(t, src=0)
    assert torch.equal(t, torch.full((3,), 1).to(dtypes[1]))


def test_all_to_all_single_output_is_checked_before_any_data_moves(group):
    size = dist.get_world_size()
    inp = torch.ones(size * 2, 3)
    out = torch.empty(size * 2, 3)
    # Every rank passes the same bad output, so every rank raises before the exchange.
    with pytest.raises(ValueError, match=f"{size + 1} output split sizes for a group of {size}"):
        dist.all_to_all_single(out, inp, output_split_sizes=[2] * (size + 1))
    with pytest.raises(ValueError, match="a negative output split size"):
        dist.all_to_all_single(out, inp, output_split_sizes=[-1] + [2] * (size - 1))
    with pytest.raises(ValueError, match=f"output split sizes add up to {size}, the output has "
                                         f"{size * 2} rows"):
        dist.all_to_all_single(out, inp, output_split_sizes=[1] * size)
    with pytest.raises(ValueError, match="is not made of the input's rows of 12 bytes"):
        dist.all_to_all_single(torch.empty(size * 6 + 1), inp)
    # The group goes on: rank r's rows j*2, j*2+1 go to rank j.
    inp = torch.full((size * 2, 3), float(dist.get_rank()))
    dist.all_to_all_single(out, inp, output_split_sizes=[2] * size, input_split_sizes=[2] * size)
    assert torch.equal(out, torch.cat([torch.full((2, 3), float(j)) for j in range(size)]))


def test_empty_tensors_in_gathers_are_a_clear_error(group):
    with pytest.raises(ValueError, match="all_gather|empty tensors"):
        dist.all_gather_into_tensor(torch.empty(0), torch.empty(0))


def test_torchrun_is_refused_with_what_to_do(group):
    import os
    import subprocess
    import sys

    if dist.get_rank() != 0:
        return
    # As torchrun starts a process: its variables, none of an MPI launcher's.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PMI_", "PMIX_", "OMPI_", "HYDI_", "MPI_LOCALRANKID"))}
    env.update(TORCHELASTIC_RUN_ID="job", RANK="0", WORLD_SIZE="2")
    p = subprocess.run([sys.executable, "-c", "import concord.torch"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "started by torchrun" in p.stderr and "concordrun -np N" in p.stderr


def test_torchrun_variables_come_from_mpi(group):
    import os

    assert int(os.environ["RANK"]) == dist.get_rank()
    assert int(os.environ["WORLD_SIZE"]) == dist.get_world_size()
    assert 0 <= int(os.environ["LOCAL_RANK"]) < int(os.environ["LOCAL_WORLD_SIZE"])
    assert os.environ["MASTER_ADDR"] and int(os.environ["MASTER_PORT"]) > 0


def test_a_direct_setting_that_differs_between_ranks_fails_on_every_rank(group):
    import os

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    if dist.get_rank() == 0:
        os.environ["CONCORD_TORCH_DIRECT"] = "0"
    try:
        with pytest.raises(Exception, match="CONCORD_TORCH_DIRECT is 0 on some ranks"):
            dist.new_group(backend="concord")
    finally:
        os.environ.pop("CONCORD_TORCH_DIRECT", None)
    t = torch.ones(2)
    dist.all_reduce(t)  # the default group is unharmed
    assert torch.equal(t, torch.full((2,), float(dist.get_world_size())))


# Making a group: its members meet with the group's timeout before any MPI call
# that would wait for them with none (bindings/torch/src/group_meeting.hpp).
# Each test makes a group of every rank with use_local_synchronization=True, so
# that torch lets the ranks kept away not call new_group at all, and ends on a
# barrier of the default group, so the next test starts on every rank alike.

def concord_group_within(seconds, ranks=None):
    """A concord group of world ranks `ranks` (every rank where None), made with a
    timeout of `seconds` and use_local_synchronization=True."""
    import datetime

    return dist.new_group(ranks, backend="concord", timeout=datetime.timedelta(seconds=seconds),
                          use_local_synchronization=True)


def reduce_then_destroy(g, members):
    """That group `g` of world ranks `members` works: an allreduce over it sums
    every member's rank + 1. Then it is destroyed."""
    t = torch.full((3,), float(dist.get_rank() + 1))
    dist.all_reduce(t, group=g)
    assert torch.equal(t, torch.full((3,), float(sum(r + 1 for r in members))))
    dist.destroy_process_group(g)


def test_a_member_that_never_comes_fails_the_making_of_the_group(group):
    import time

    size, rank = dist.get_world_size(), dist.get_rank()
    if size == 1:
        pytest.skip("needs two ranks")
    absent = size - 1
    if rank != absent:
        start = time.monotonic()
        # The first member counts; the others (at 3 ranks) are told by it.
        with pytest.raises(dist.DistBackendError,
                           match=f"rank {absent} did not come to make it within 1 s "
                                 r"\(the group's timeout.*the group is not made"):
            concord_group_within(1)
        # The first member counts from its own start, the others are told.
        assert (1.0 if rank == 0 else 0) <= time.monotonic() - start < 15
    dist.barrier()


def test_a_first_member_that_never_comes_fails_the_others(group):
    import time

    if dist.get_world_size() == 1:
        pytest.skip("needs two ranks")
    if dist.get_rank() != 0:
        start = time.monotonic()
        with pytest.raises(dist.DistBackendError,
                           match=r"rank 0, its first member, did not say within 2 s \(the "
                                 r"group's timeout and a grace of 1 s\)"):
            concord_group_within(1)
        # The timeout and a grace of 1 s for the first member's word.
        assert 2.0 <= time.monotonic() - start < 15
    dist.barrier()


def test_a_first_member_that_comes_after_the_others_gave_up_names_them(group):
    import time

    size, rank = dist.get_world_size(), dist.get_rank()
    if size == 1:
        pytest.skip("needs two ranks")
    others = ", ".join(str(r) for r in range(1, size))
    if rank == 0:
        time.sleep(4)  # the others give up after 2 s (the timeout and the grace)
        with pytest.raises(dist.DistBackendError,
                           match=f"ranks? {others} came more than 1 s before rank 0 \\(the "
                                 r"group's first member\) did, gave up waiting for its word, "
                                 r"and did not come again within 1 s"):
            concord_group_within(1)
    else:
        with pytest.raises(dist.DistBackendError, match="rank 0, its first member, did not say"):
            concord_group_within(1)
    dist.barrier()


def test_a_group_is_made_when_a_member_comes_late_after_a_failed_meeting(group):
    import time

    size, rank = dist.get_world_size(), dist.get_rank()
    if size == 1:
        pytest.skip("needs two ranks")
    # A meeting rank 0 misses: the others' arrivals and withdrawals wait for it,
    # and the next meeting must not count them.
    if rank != 0:
        with pytest.raises(dist.DistBackendError, match="did not say"):
            concord_group_within(0.5)
    dist.barrier()
    if rank == size - 1:
        time.sleep(0.5)
    reduce_then_destroy(concord_group_within(20), range(size))
    dist.barrier()


def test_a_group_made_out_of_turn_fails_at_once_at_a_first_member_making_another(group):
    import time

    # Rank 1 makes [0, 1] while rank 0, its first member, makes the group of
    # every rank: rank 0 answers at once that it is, and goes on waiting for
    # rank 1, which then comes. Before, both went into MPI_Comm_create_group
    # for different groups and hung there.
    size, rank = dist.get_world_size(), dist.get_rank()
    if size < 3:
        pytest.skip("needs three ranks")
    if rank == 1:
        start = time.monotonic()
        with pytest.raises(ValueError,
                           match=r"rank 0, its first member, is making the group of world ranks "
                                 r"\[0, 1, 2(, \d+)*\] now, not this one: every rank that two "
                                 r"groups share must call new_group for them in the same order"):
            concord_group_within(20, [0, 1])
        assert time.monotonic() - start < 10
    reduce_then_destroy(concord_group_within(20), range(size))
    dist.barrier()


def test_a_group_made_out_of_turn_fails_once_the_member_it_reached_is_told(group):
    import time

    # Rank 2 makes [1, 2] while rank 1, its first member, waits in the group of
    # every rank for rank 0's word: rank 1 cannot tell a call out of turn from
    # the arrival of a rank that gave up on this group, until rank 0 has counted
    # rank 2 missing. Then it tells rank 2, which fails before its own timeout.
    size, rank = dist.get_world_size(), dist.get_rank()
    if size < 3:
        pytest.skip("needs three ranks")
    if rank == 2:
        start = time.monotonic()
        with pytest.raises(ValueError,
                           match=r"rank 1, its first member, is making the group of world ranks "
                                 r"\[0, 1, 2(, \d+)*\] now, not this one"):
            concord_group_within(20, [1, 2])
        assert time.monotonic() - start < 10
    else:
        with pytest.raises(dist.DistBackendError, match="rank 2 did not come to make it"):
            concord_group_within(1)
    dist.barrier()


def test_a_member_that_left_a_failed_meeting_can_make_another_group_at_once(group):
    import time

    # Rank 0 never comes to a group of every rank. Rank 2 gives up on it first
    # and makes [1, 2], while rank 1, that group's first member, still waits in
    # the failed meeting: rank 2's arrival waits for rank 1's meeting of [1, 2]
    # (rank 2 came to the failed one, so this is no call out of turn), and the
    # group is made once rank 1's own wait has failed.
    size, rank = dist.get_world_size(), dist.get_rank()
    if size < 3:
        pytest.skip("needs three ranks")
    if rank != 0:
        if rank == 1:
            time.sleep(1.5)  # still waiting when rank 2 gives up, after 2 s
        with pytest.raises(dist.DistBackendError, match="rank 0, its first member, did not say"):
            concord_group_within(1)
    if rank in (1, 2):
        reduce_then_destroy(concord_group_within(20, [1, 2]), [1, 2])
    dist.barrier()


def test_a_member_late_for_a_meeting_its_first_member_gave_up_on_is_told_so(group):
    import time

    # Rank 1 comes to a group of every rank after rank 0, its first member, has
    # given up on it (rank 0's timeout of 1 s) and gone on to make [0, 1]: rank
    # 0 tells it so, instead of taking its late arrival for a call out of turn,
    # and the two then make [0, 1].
    size, rank = dist.get_world_size(), dist.get_rank()
    if size < 3:
        pytest.skip("needs three ranks")
    if rank == 1:
        time.sleep(1.5)
        with pytest.raises(dist.DistBackendError,
                           match="rank 0, its first member, had given up on it before this "
                                 "rank's arrival reached it"):
            concord_group_within(1)
    else:
        # Or, where rank 1 came to an earlier group of every rank and gave up
        # on it (the test above), that: the two are not told apart.
        with pytest.raises(dist.DistBackendError,
                           match="rank 1 (did not come to make it|came more than 1 s before)"):
            concord_group_within(1)
    if rank in (0, 1):
        reduce_then_destroy(concord_group_within(20, [0, 1]), [0, 1])
    dist.barrier()

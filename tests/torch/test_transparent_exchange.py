"""The gradient exchange of Keras-on-torch's transparent mode
(concord.torch.transparent.exchange) at 1-3 ranks: a gradient some ranks lack
travels as zeros, and stays None only where every rank lacks it."""
import torch
import torch.distributed as dist

from concord.torch.transparent import exchange


def test_missing_gradients_average_as_zeros_and_stay_none_where_all_lack_them(group):
    rank, size = dist.get_rank(), dist.get_world_size()
    like = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.float64), torch.zeros(4)]
    grads = [torch.full((3,), float(rank + 1)),
             None if rank == 0 else torch.full((2, 2), 2.0 * rank, dtype=torch.float64),
             None]
    out = exchange.average(grads, like)
    torch.testing.assert_close(out[0], torch.full((3,), sum(r + 1 for r in range(size)) / size))
    if size == 1:
        assert out[1] is None  # the only rank has none
    else:
        mean = sum(2.0 * r for r in range(1, size)) / size
        torch.testing.assert_close(out[1], torch.full((2, 2), mean, dtype=torch.float64))
    assert out[2] is None
    half = exchange.average([torch.full((5,), 1.5)], [torch.zeros(5)], compression="fp16")
    assert half[0].dtype == torch.float32 and half[0].tolist() == [1.5] * 5

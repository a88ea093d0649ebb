"""A training script written for Horovod's PyTorch API (the usual shape of
Horovod's examples), with only its import changed. Writes, on rank 0, the
loss of every epoch and every rank's final weights (gathered), for
test_horovod_script.py."""
import json
import sys

import torch

import concord.horovod.torch as hvd  # was: import horovod.torch as hvd

hvd.init()
torch.manual_seed(hvd.rank())  # different initial weights: the broadcast must fix them
torch.set_num_threads(1)

g = torch.Generator().manual_seed(7)
x = torch.randn(96, 8, generator=g)
y = (x @ torch.randn(8, 1, generator=g)).tanh()
shard = slice(hvd.rank(), None, hvd.size())  # what DistributedSampler gives each rank
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[shard], y[shard]),
                                     batch_size=8)

model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.02 * hvd.size(), momentum=0.5)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=hvd.Compression.none)

losses = []
for epoch in range(6):
    total = torch.zeros(())
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    losses.append(hvd.allreduce(total / len(loader), name="epoch_loss").item())

weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every_rank = hvd.allgather(weights.unsqueeze(0))
if hvd.rank() == 0:
    with open(sys.argv[1], "w") as f:
        json.dump({"size": hvd.size(), "losses": losses, "weights": every_rank.tolist()}, f)

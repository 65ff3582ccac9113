"""A real DDP program under torchrun (gloo, CPU): every rank prints a JSON line each 5 steps
with its own loss, and rank 0 also draws a tqdm bar on stderr. Run with --tee 3, so that
torchrun prefixes each line with its rank: `[default0]:`."""

import json
import sys

import torch
import torch.distributed as dist
from tqdm import tqdm

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
truth = torch.tensor([[2.0], [-1.0], [0.5], [3.0]])
bar = tqdm(total=20, mininterval=0, file=sys.stderr, disable=rank != 0)
for step in range(1, 21):
    x = torch.rand(64, 4)
    loss = torch.nn.functional.mse_loss(model(x), x @ truth + 1.0)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
    bar.update(1)
    if step % 5 == 0:
        print(
            json.dumps({"step": step, "total": 20, "loss": round(loss.item(), 4), "rank": rank}),
            flush=True,
        )
bar.close()
dist.destroy_process_group()

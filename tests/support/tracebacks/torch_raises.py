"""Two ranks over gloo on CPU; rank 1 raises after the first all-reduce."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"rank={rank} step 0 sum={value.item():g}", flush=True)
if rank == 1:
    raise ValueError(f"bad batch at step 1 on rank {rank}: expected 32 samples, got 31")
dist.barrier()

"""init_process_group("tessera", init_method="file://...") (PyTorch's FileStore)."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import tessera.torch  # noqa: F401

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
path = sys.argv[1]
dist.init_process_group("tessera", init_method=f"file://{path}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
t = torch.arange(6, dtype=torch.float64) * (rank + 1)
dist.all_reduce(t)
want = torch.arange(6, dtype=torch.float64) * (world * (world + 1) / 2)
assert torch.equal(t, want), t
b = torch.full((3,), float(rank))
dist.broadcast(b, world - 1)
assert torch.equal(b, torch.full((3,), float(world - 1))), b
dist.barrier()
print(f"file:// rank {rank}/{world}: ok", flush=True)
dist.destroy_process_group()

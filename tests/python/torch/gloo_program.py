"""An unmodified PyTorch program (backend "gloo", env://): shows that
`tessera launch` gives PyTorch the torchrun environment it expects."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
assert int(os.environ["LOCAL_RANK"]) == rank and int(os.environ["LOCAL_WORLD_SIZE"]) == world
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == world * (world + 1) / 2, t
out = [torch.zeros(2) for _ in range(world)]
dist.all_gather(out, torch.full((2,), float(rank)))
assert [o[0].item() for o in out] == list(range(world)), out
dist.barrier()
print(f"gloo program rank {rank}/{world}: ok (MASTER_PORT={os.environ['MASTER_PORT']})", flush=True)
dist.destroy_process_group()

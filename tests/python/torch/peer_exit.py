"""A peer that exits in the middle of a collective: every other rank gets a
Python exception (naming the operation) within the group's timeout, no hang.
Run: TORCH_TEST_TIMEOUT_S=10 tessera launch --nproc N -- /usr/bin/python3 peer_exit.py"""
import os
import sys
import time

import torch
import torch.distributed as dist

from common import init


def main():
    init("tessera")
    rank, world = dist.get_rank(), dist.get_world_size()
    timeout = float(os.environ.get("TORCH_TEST_TIMEOUT_S", "60"))
    x = torch.ones(1 << 20)
    dist.all_reduce(x)  # everyone is connected
    assert x[0].item() == world
    if rank == world - 1:
        dist.all_reduce(torch.ones(16 << 20), async_op=True)  # 64 MiB, then gone mid-way
        os._exit(0)
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(16 << 20))
        x = torch.ones(4)
        dist.all_reduce(x)  # a fast path may finish the first; this one cannot
        print(f"peer_exit rank {rank}: FAIL no exception after the peer left", flush=True)
        os._exit(1)
    except RuntimeError as e:
        elapsed = time.monotonic() - t0
        ok = elapsed <= timeout + 5 and "all_reduce" in str(e)
        print(f"peer_exit rank {rank}: {'ok' if ok else 'FAIL'}: RuntimeError after {elapsed:.1f} s "
              f"(timeout {timeout:.0f} s): {str(e)[:300]}", flush=True)
        os._exit(0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())

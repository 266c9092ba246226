#!/usr/bin/env python3
"""torch.distributed.all_reduce with the 'tessera' backend against 'gloo', in
the same processes (run under `tessera launch --nproc N`; bench/torch_backend.sh
drives it and compares with `tessera ccl-perf`).

Prints one JSON line (rank 0): per size, the time of one blocking
all_reduce (fp32 SUM, in place) measured as `tessera ccl-perf -a 3` does —
each rank's mean over its timed loop, the slowest rank's — for tessera with
ordinary tensors, tessera with tensors from tessera.torch.empty_shared (zero
copy) and gloo, and nccl-tests' busbw (2(n-1)/n * bytes / time).

Usage: torch_backend.py [--sizes 8,67108864] [--iters 2000,10] [--warmup 200,3]
"""
import argparse
import json
import time

import torch
import torch.distributed as dist

import tessera.torch


def bench(group, nbytes, iters, warmup, shared=False):
    if shared:  # every rank's tensor from AllocShared: zero copy
        x = tessera.torch.empty_shared(max(1, nbytes // 4)).fill_(1.0)
    else:  # (2 MiB aligned on huge pages when THP_MEM_ALLOC_ENABLE=1: tessera.torch)
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(x, group=group)
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x, group=group)
    mean = (time.perf_counter() - t0) / iters
    # The slowest rank's mean (ccl-perf -a 3: every rank must finish).
    t = torch.tensor([mean], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,67108864")
    ap.add_argument("--iters", default="5000,10")
    ap.add_argument("--warmup", default="500,3")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    iters = [int(s) for s in args.iters.split(",")]
    warmup = [int(s) for s in args.warmup.split(",")]
    dist.init_process_group("tessera")
    gloo = dist.new_group(backend="gloo")
    n = dist.get_world_size()
    rows = []
    for nbytes, it, wu in zip(sizes, iters, warmup):
        row = {"bytes": nbytes}
        for name, group, shared in [("tessera", dist.group.WORLD, False), ("tessera_shared", dist.group.WORLD, True),
                                    ("gloo", gloo, False)]:
            t = bench(group, nbytes, it, wu, shared)
            row[name + "_us"] = t * 1e6
            row[name + "_busbw_GBps"] = 2 * (n - 1) / n * nbytes / t / 1e9
        row["ratio"] = row["gloo_us"] / row["tessera_us"]
        rows.append(row)
    if dist.get_rank() == 0:
        print(json.dumps({"nproc": n, "thp_alloc": tessera.torch.THP_ALLOC_ENABLED, "rows": rows}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

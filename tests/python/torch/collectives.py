"""Every collective of the 'tessera' backend against Gloo's result on the same
inputs (bitwise for data movement, tolerance for floating-point reductions),
plus subgroups, async works and non-contiguous tensors.
Run: tessera launch --nproc N -- /usr/bin/python3 collectives.py"""
import torch
import torch.distributed as dist

from common import FLOAT_TYPES, INT_TYPES, Checker, data, init

R = dist.ReduceOp


def both(fn, group_t, group_g):
    """fn(group) on tessera then on gloo; returns both results."""
    return fn(group_t), fn(group_g)


def main():
    init("tessera")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    tess = dist.group.WORLD
    c = Checker(f"collectives[{world}]")

    # all_reduce: every op, every dtype.
    for dtype in FLOAT_TYPES + INT_TYPES:
        for k, op in enumerate([R.SUM, R.PRODUCT, R.MIN, R.MAX]):
            kind = "prod" if op == R.PRODUCT else ("sum" if op == R.SUM else "any")
            x = data(rank, 1000, dtype, kind, seed=k)
            want = x.clone()
            try:
                dist.all_reduce(want, op=op, group=gloo)
            except RuntimeError:  # Gloo lacks some dtypes (bf16 in 1.13): the exact local oracle
                parts = [data(r, 1000, dtype, kind, seed=k).double() for r in range(world)]
                acc = parts[0]
                for p in parts[1:]:
                    acc = [acc + p, acc * p, torch.minimum(acc, p), torch.maximum(acc, p)][k]
                want = acc.to(dtype)
            got = x.clone()
            dist.all_reduce(got, op=op)
            c.close(got, want, f"all_reduce {op} {dtype}")
    for dtype in FLOAT_TYPES:  # AVG (Gloo has none: its SUM / world)
        x = data(rank, 1000, dtype, "sum", seed=9)
        want = x.double().clone()  # (x itself when float64)
        dist.all_reduce(want, group=gloo)
        got = x.clone()
        dist.all_reduce(got, op=R.AVG)
        c.close(got, (want / world).to(dtype), f"all_reduce AVG {dtype}")
    for dtype in INT_TYPES + [torch.int16, torch.bool]:  # bitwise ops, and dtypes Tessera folds locally
        for op in [R.BAND, R.BOR, R.BXOR] + ([R.SUM, R.MAX] if dtype == torch.int16 else []):
            OPNAME = {R.BAND: "band", R.BOR: "bor", R.BXOR: "bxor", R.SUM: "sum", R.MAX: "max"}
            if dtype == torch.bool and op == R.BXOR:
                continue
            x = data(rank, 777, dtype, "sum", seed=3)
            want = x.clone()
            try:
                dist.all_reduce(want, op=op, group=gloo)
            except RuntimeError:  # Gloo 1.13 lacks some (int8, bool, int16): fold in rank order
                want = data(0, 777, dtype, "sum", seed=3)
                for r in range(1, world):
                    p = data(r, 777, dtype, "sum", seed=3)
                    want = {"band": want & p, "bor": want | p, "bxor": want ^ p,
                            "sum": want + p, "max": torch.maximum(want, p)}[OPNAME[op]]
            got = x.clone()
            dist.all_reduce(got, op=op)
            c.equal(got, want, f"all_reduce {op} {dtype}")

    # Non-contiguous in place.
    base = data(rank, 64, torch.float32).view(8, 8)
    got, want = base.clone().t(), base.clone().t()
    dist.all_reduce(got)
    dist.all_reduce(want, group=gloo)
    c.close(got, want, "all_reduce of a transposed tensor")
    c.expect(not got.is_contiguous(), "the transposed tensor stays a view")

    # broadcast / reduce, every root.
    for root in range(world):
        for dtype in [torch.float32, torch.bfloat16, torch.int64, torch.complex64]:
            x = data(rank, 513, torch.float32).to(dtype)
            got, want = x.clone(), x.clone()
            dist.broadcast(got, root)
            if dtype in (torch.complex64, torch.bfloat16):  # Gloo 1.13 moves neither: the root's data
                want = data(root, 513, torch.float32).to(dtype)
            else:
                dist.broadcast(want, root, group=gloo)
            c.equal(got, want, f"broadcast root {root} {dtype}")
        x = data(rank, 300, torch.float32)
        got, want = x.clone(), x.clone()
        dist.reduce(got, root, op=R.MAX)
        dist.reduce(want, root, op=R.MAX, group=gloo)
        if rank == root:
            c.equal(got, want, f"reduce MAX root {root}")
        x = data(rank, 300, torch.float64, "sum")
        got, want = x.clone(), x.clone()
        dist.reduce(got, root)
        dist.reduce(want, root, group=gloo)
        if rank == root:
            c.close(got, want, f"reduce SUM root {root}")

    # all_gather (list), all_gather_into_tensor / _allgather_base.
    for dtype in [torch.float16, torch.int32, torch.uint8]:
        x = data(rank, 37, dtype)
        got = [torch.zeros_like(x) for _ in range(world)]
        want = [torch.zeros_like(x) for _ in range(world)]
        dist.all_gather(got, x)
        dist.all_gather(want, x, group=gloo)
        c.equal(torch.stack(got), torch.stack(want), f"all_gather {dtype}")
        out = torch.zeros(world * 37, dtype=dtype)
        dist.all_gather_into_tensor(out, x)
        c.equal(out, torch.stack(want).flatten(), f"all_gather_into_tensor {dtype}")
        out2 = torch.zeros(world * 37, dtype=dtype)
        dist._all_gather_base(out2, x)
        c.equal(out2, out, f"_all_gather_base {dtype}")

    # gather / scatter, every root.
    for root in range(world):
        x = data(rank, 21, torch.float32, seed=root)
        got = [torch.zeros(21) for _ in range(world)] if rank == root else None
        want = [torch.zeros(21) for _ in range(world)] if rank == root else None
        dist.gather(x, got, dst=root)
        dist.gather(x, want, dst=root, group=gloo)
        if rank == root:
            c.equal(torch.stack(got), torch.stack(want), f"gather root {root}")
        chunks = [data(r, 19, torch.int64, seed=7) for r in range(world)] if rank == root else None
        got, want = torch.zeros(19, dtype=torch.int64), torch.zeros(19, dtype=torch.int64)
        dist.scatter(got, chunks, src=root)
        dist.scatter(want, chunks, src=root, group=gloo)
        c.equal(got, want, f"scatter root {root}")

    # reduce_scatter (list and tensor forms). Gloo has no reduce_scatter in
    # 1.13: its oracle is Gloo's all_reduce of the whole input, our block.
    for dtype, op in [(torch.float32, R.SUM), (torch.int32, R.MAX), (torch.bfloat16, R.SUM), (torch.int16, R.SUM),
                      (torch.int64, R.BXOR)]:
        n = 50
        full = data(rank, n * world, dtype, "sum", seed=5)
        want = full.clone()
        try:
            dist.all_reduce(want, op=op, group=gloo)
        except RuntimeError:  # Gloo 1.13 lacks bf16 and int16: fold in rank order
            parts = [data(r, n * world, dtype, "sum", seed=5) for r in range(world)]
            want = sum(p.double() for p in parts).to(dtype) if op == R.SUM else None
            assert want is not None
        block = want[rank * n:(rank + 1) * n]
        got = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter(got, list(full.chunk(world)), op=op)
        c.close(got, block, f"reduce_scatter {op} {dtype}")
        got2 = torch.zeros(n, dtype=dtype)
        dist.reduce_scatter_tensor(got2, full, op=op)
        c.close(got2, block, f"reduce_scatter_tensor {op} {dtype}")

    # all_to_all_single, equal and uneven split sizes; all_to_all of lists.
    x = data(rank, 8 * world, torch.float32).view(4 * world, 2)
    got, want = torch.zeros_like(x), torch.zeros_like(x)
    dist.all_to_all_single(got, x)
    dist.all_to_all_single(want, x, group=gloo)
    c.equal(got, want, "all_to_all_single equal splits")
    in_splits = [(rank + p) % 3 + 1 for p in range(world)]  # rows rank sends to peer p
    out_splits = [(p + rank) % 3 + 1 for p in range(world)]  # rows peer p sends to rank
    x = data(rank, sum(in_splits) * 3, torch.int64).view(-1, 3)
    got = torch.zeros(sum(out_splits), 3, dtype=torch.int64)
    want = torch.zeros_like(got)
    dist.all_to_all_single(got, x, out_splits, in_splits)
    dist.all_to_all_single(want, x, out_splits, in_splits, group=gloo)
    c.equal(got, want, "all_to_all_single uneven splits")
    ins = [data(rank, in_splits[p], torch.float64, seed=p) for p in range(world)]
    got = [torch.zeros(out_splits[p], dtype=torch.float64) for p in range(world)]
    # Gloo 1.13 has no list all_to_all: what peer p sent (its data for us).
    want = [data(p, out_splits[p], torch.float64, seed=rank) for p in range(world)]
    dist.all_to_all(got, ins)
    c.equal(torch.cat(got), torch.cat(want), "all_to_all lists")

    # send/recv, isend/irecv: a ring, both directions at once (large messages).
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    big = data(rank, 3 << 20, torch.float32)  # 12 MiB: larger than any channel buffer
    got = torch.zeros_like(big)
    reqs = [dist.isend(big, nxt), dist.irecv(got, prv)]
    for q in reqs:
        q.wait()
    c.equal(got, data(prv, 3 << 20, torch.float32), "isend/irecv ring of 12 MiB")
    if world >= 2:
        if rank == 0:
            dist.send(torch.arange(10, dtype=torch.int32), 1, tag=7)
        elif rank == 1:
            y = torch.zeros(10, dtype=torch.int32)
            dist.recv(y, 0, tag=7)
            c.equal(y, torch.arange(10, dtype=torch.int32), "send/recv with a tag")

    # async works: several in flight, wait out of order, futures.
    xs = [data(rank, 1000 + i, torch.float32, "sum", seed=i) for i in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    fut = works[1].get_future()
    for w in reversed(works):
        w.wait()
    c.expect(all(w.is_completed() for w in works), "async works complete after wait")
    c.expect(torch.equal(fut.wait()[0], xs[1]), "the future holds the all_reduce output")
    for i, x in enumerate(xs):
        want = data(rank, 1000 + i, torch.float32, "sum", seed=i)
        dist.all_reduce(want, group=gloo)
        c.close(x, want, f"async all_reduce {i}")

    # subgroups: evens and odds, and a group without rank 0.
    evens = dist.new_group([r for r in range(world) if r % 2 == 0], backend="tessera")
    odds = dist.new_group([r for r in range(world) if r % 2 == 1], backend="tessera")
    tail = dist.new_group(list(range(1, world)), backend="tessera") if world > 2 else None
    mine = evens if rank % 2 == 0 else odds
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=mine)
    c.expect(x.item() == sum(r for r in range(world) if r % 2 == rank % 2), f"subgroup sum {x.item()}")
    if tail is not None and rank > 0:
        y = torch.tensor([rank])
        dist.all_reduce(y, group=tail, op=R.MIN)
        c.expect(y.item() == 1, f"group without rank 0: min {y.item()}")
        z = torch.zeros(1) + rank
        dist.broadcast(z, src=world - 1, group=tail)  # global rank as src
        c.expect(z.item() == world - 1, "subgroup broadcast from its last rank")

    # Zero copy: every rank's tensors from tessera.torch.empty_shared.
    import tessera.torch as tt
    before = dist.group.WORLD.zero_copy_ops()
    x = tt.empty_shared(1 << 20)  # 4 MiB: large enough for the zero-copy path
    c.expect(bool((x == 0).all()), "empty_shared is zeroed")
    x.copy_(data(rank, 1 << 20, torch.float32, "sum", seed=11))
    want = x.clone()
    dist.all_reduce(want, group=gloo)
    dist.all_reduce(x)
    c.close(x, want, "all_reduce of empty_shared tensors")
    c.expect(dist.group.WORLD.zero_copy_ops() > before,
             f"zero_copy_ops went {before} -> {dist.group.WORLD.zero_copy_ops()}")
    g = tt.empty_shared(world, 1 << 18, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(g, x[: 1 << 18].to(torch.bfloat16))
    # x is the same on every rank after the all_reduce: every block is ours.
    c.equal(g, x[: 1 << 18].to(torch.bfloat16).expand(world, -1), "all_gather into an empty_shared tensor")

    # THP_MEM_ALLOC_ENABLE=1 (run by ctest torch_collectives_thp_2): large
    # tensors come 2 MiB aligned from the huge-page allocator, and a large
    # all_reduce on them (the single-copy path) matches Gloo's.
    import os
    if os.environ.get("THP_MEM_ALLOC_ENABLE") == "1":
        c.expect(tt.THP_ALLOC_ENABLED, "THP_MEM_ALLOC_ENABLE=1 installed the huge-page allocator")
        big = data(rank, 3 << 20, torch.float32, "sum", seed=13)  # 12 MiB
        c.expect(big.data_ptr() % (2 << 20) == 0, f"a 12 MiB tensor at {big.data_ptr():#x} is 2 MiB aligned")
        want = big.clone()
        dist.all_reduce(want, group=gloo)
        dist.all_reduce(big)
        c.close(big, want, "all_reduce of 12 MiB on huge-page tensors")
    else:
        c.expect(not tt.THP_ALLOC_ENABLED, "no huge-page allocator unless THP_MEM_ALLOC_ENABLE=1")

    dist.barrier()
    c.finish()  # destroys the groups and exits


if __name__ == "__main__":
    main()

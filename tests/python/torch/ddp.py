"""DistributedDataParallel and ZeroRedundancyOptimizer on 'tessera' against
the same runs on Gloo: 20 steps of a small model on the same data give the
same losses (fp32 tolerance), with small buckets (several per step), with
the built-in fp16 compression comm hook, and with ZeRO's sharded optimizer.
Run: tessera launch --nproc N -- /usr/bin/python3 ddp.py"""
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from common import Checker, init

STEPS = 20


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4))


def batch(rank, step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(16, 32, generator=g), torch.randn(16, 4, generator=g)


def train(group, hook=None, zero=False):
    net = DDP(model(), process_group=group, bucket_cap_mb=0.005)  # ~1300 floats: several buckets
    if hook is not None:
        net.register_comm_hook(group, hook)
    if zero:
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.Adam, process_group=group,
                                      lr=1e-2)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    losses = []
    rank = dist.get_rank()
    for step in range(STEPS):
        x, y = batch(rank, step)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        # The global mean loss, through Gloo for both runs.
        l = loss.detach().clone()
        dist.all_reduce(l, group=REF)
        losses.append(l.item() / dist.get_world_size())
    params = torch.cat([p.detach().flatten() for p in net.parameters()])
    return torch.tensor(losses), params


def main():
    global REF
    init("tessera")
    REF = dist.new_group(backend="gloo")
    tess = dist.group.WORLD
    c = Checker(f"ddp[{dist.get_world_size()}]")
    for name, kw, tol in [("plain", {}, 1e-5), ("fp16 hook", {"hook": default_hooks.fp16_compress_hook}, 2e-3),
                          ("ZeRO Adam", {"zero": True}, 1e-5)]:
        lt, pt = train(tess, **kw)
        lg, pg = train(REF, **kw)
        c.expect(torch.allclose(lt, lg, rtol=tol, atol=tol),
                 f"{name}: losses differ: tessera {lt[-3:].tolist()} gloo {lg[-3:].tolist()}")
        c.expect(torch.allclose(pt, pg, rtol=tol * 10, atol=tol * 10), f"{name}: parameters differ after {STEPS} steps")
        c.expect(lt[-1] < lt[0], f"{name}: the loss goes down ({lt[0]:.4f} -> {lt[-1]:.4f})")
        if dist.get_rank() == 0:
            print(f"{name}: loss {lt[0]:.5f} -> {lt[-1]:.5f} (gloo {lg[-1]:.5f}), max diff "
                  f"{(lt - lg).abs().max():.2e}", flush=True)
    c.finish()  # destroys the groups and exits


if __name__ == "__main__":
    main()

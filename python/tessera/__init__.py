"""Tessera from Python.

Submodules:
  tessera.torch   registers the "tessera" backend of torch.distributed
  tessera.plan    the planner (evaluate, search)
  tessera.sim     the simulator (collective, step)
  tessera.train   training runs (run)
and tessera.launch(command, nproc=N, ...), the job launcher.

plan, sim, train and launch take the CLI's options as keyword arguments
(`--micro-batch 2` is `micro_batch=2`, a flag is `no_sp=True`) and return
the CLI's --json document as a dict. Failures raise tessera.Error with
Tessera's message. See docs/python.md. Built for Debian's /usr/bin/python3.
"""

from tessera._tessera import Error
from tessera import plan, sim, train
from tessera._launch import launch

__all__ = ["Error", "plan", "sim", "train", "launch"]

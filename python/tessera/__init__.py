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

import os


def _passive_omp_wait_for_ranks():
    # As the CLI (tools/tessera/main.cc): a process that is one of several
    # ranks on a host (WORLD_SIZE, OMPI_COMM_WORLD_SIZE or SLURM_NTASKS > 1)
    # lets idle OpenMP threads sleep instead of spinning on cores the other
    # ranks need, unless the user chose a policy. libgomp reads the variable
    # when it loads, so this works when tessera is imported before anything
    # else that loads OpenMP (torch, numpy's BLAS).
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        try:
            if int(os.environ.get(name, "0")) > 1:
                os.environ["OMP_WAIT_POLICY"] = "passive"
                return
        except ValueError:
            pass


_passive_omp_wait_for_ranks()

from tessera._tessera import Error  # noqa: E402
from tessera import plan, sim, train  # noqa: E402
from tessera._launch import launch  # noqa: E402

__all__ = ["Error", "plan", "sim", "train", "launch"]

"""Tessera as a torch.distributed backend.

    import tessera.torch            # registers the backend "tessera"
    import torch.distributed as dist
    dist.init_process_group("tessera")   # env:// (tessera launch, torchrun) or file://

The process group runs on Tessera's communicator (shared-memory zero-copy
collectives on one host, TCP across hosts); see docs/pytorch.md for what is
supported. Built against Debian's PyTorch 1.13 (/usr/bin/python3).
"""

import torch.distributed as _dist

from . import _c10d

ProcessGroupTessera = _c10d.ProcessGroupTessera
BACKEND = "tessera"


def _create(store, rank, size, timeout):
    return _c10d.create_process_group(store, rank, size, timeout)


def _register():
    if BACKEND.upper() not in _dist.Backend._plugins:
        _dist.Backend.register_backend(BACKEND, _create)


_register()

__all__ = ["BACKEND", "ProcessGroupTessera"]

"""Tessera as a torch.distributed backend.

    import tessera.torch            # registers the backend "tessera"
    import torch.distributed as dist
    dist.init_process_group("tessera")   # env:// (tessera launch, torchrun) or file://

The process group runs on Tessera's communicator (shared-memory zero-copy
collectives on one host, TCP across hosts); see docs/pytorch.md for what is
supported. Built against Debian's PyTorch 1.13 (/usr/bin/python3).
"""

import torch
import torch.distributed as _dist

from . import _c10d

ProcessGroupTessera = _c10d.ProcessGroupTessera
BACKEND = "tessera"
# THP_MEM_ALLOC_ENABLE=1 (PyTorch >= 2.1's switch, emulated for 1.13): CPU
# tensors of 2 MiB and more are 2 MiB aligned and advised for huge pages.
THP_ALLOC_ENABLED = _c10d.thp_alloc_enabled()


def empty_shared(*size, dtype=torch.float32):
    """An uninitialized (zeroed) CPU tensor on memory from Tessera's
    AllocShared: when every rank's tensors of a large collective come from
    here, the ranks of one host read and write each other's tensors directly
    (zero copy; the group's zero_copy_ops() counts them). Freed with the
    tensor; do not free it while an operation on it is pending."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    shape = torch.Size(size)
    nbytes = shape.numel() * torch.empty((), dtype=dtype).element_size()
    raw = _c10d.alloc_shared_bytes(max(1, nbytes))
    return raw[:nbytes].view(dtype).view(shape)


def _create(store, rank, size, timeout):
    return _c10d.create_process_group(store, rank, size, timeout)


def _register():
    if BACKEND.upper() not in _dist.Backend._plugins:
        _dist.Backend.register_backend(BACKEND, _create)


_register()

__all__ = ["BACKEND", "ProcessGroupTessera", "empty_shared"]

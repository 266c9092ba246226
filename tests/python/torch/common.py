"""Helpers of the torch backend tests (run under `tessera launch`)."""
import os
import sys

import torch
import torch.distributed as dist

FLOAT_TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 4e-3}
INT_TYPES = [torch.int8, torch.uint8, torch.int32, torch.int64]
FLOAT_TYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


class Checker:
    def __init__(self, name):
        self.name = name
        self.checks = 0
        self.failures = []

    def expect(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures.append(what)
            print(f"FAIL {self.name} rank {dist.get_rank()}: {what}", flush=True)

    def close(self, got, want, what):
        if got.dtype in FLOAT_TOL:
            tol = FLOAT_TOL[got.dtype]
            # Half types: Gloo rounds after every step, Tessera accumulates in
            # fp32: differences of a few ulp of the largest value.
            scale = max(1.0, want.double().abs().max().item()) if got.dtype in (torch.float16, torch.bfloat16) else 1.0
            ok = got.shape == want.shape and torch.allclose(got.double(), want.double(), rtol=tol, atol=tol * scale)
        else:
            ok = torch.equal(got, want)
        self.expect(ok, f"{what}: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}")

    def equal(self, got, want, what):
        self.expect(got.dtype == want.dtype and torch.equal(got, want),
                    f"{what} not bitwise equal: got {got.flatten()[:6].tolist()} want {want.flatten()[:6].tolist()}")

    def finish(self):
        """Prints the tally, destroys the process groups and ends the process
        with os._exit: Gloo's worker threads (the reference groups) may still
        drop a tensor while the interpreter finalizes, and such a thread is
        ended by Python with a forced unwind that aborts the process
        ("terminate called without an active exception", backtrace:
        ProcessGroupGloo::runLoop -> ~TensorImpl -> PyEval_AcquireThread ->
        PyThread_exit_thread). PyTorch 1.13's race, not the code under test."""
        rank = dist.get_rank()
        print(f"{self.name} rank {rank}: {self.checks - len(self.failures)}/{self.checks} checks passed", flush=True)
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1 if self.failures else 0)


def data(rank, n, dtype, kind="any", seed=0):
    """Deterministic per-rank data; small values for products, non-zero for divisions."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        if kind == "prod":
            return (0.9 + 0.2 * torch.rand(n, generator=g, dtype=torch.float64)).to(dtype)
        return (torch.randn(n, generator=g, dtype=torch.float64) * 4).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    hi = 4 if kind == "prod" else (100 if dtype in (torch.int8, torch.uint8) else 1000)
    lo = 0 if dtype == torch.uint8 or kind == "prod" else -hi
    if dtype == torch.uint8 and kind == "sum":
        hi = 255 // dist.get_world_size()
    if dtype == torch.int8 and kind == "sum":
        hi = 127 // dist.get_world_size()
        lo = -hi
    return torch.randint(lo, hi, (n,), generator=g).to(dtype)


def init(backend="tessera"):
    import tessera.torch  # noqa: F401  registers the backend
    timeout = float(os.environ.get("TORCH_TEST_TIMEOUT_S", "60"))
    import datetime
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))

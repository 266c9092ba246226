#!/usr/bin/env python3
"""ONNX fine-tuning speed: `tessera onnx train` against PyTorch 1.13 training
the same model.

The models of tests/python/models/onnx_train_parity.py (a CNN with
BatchNorm, a BERT-style encoder), at sizes given here, are built in PyTorch,
exported by torch.onnx.export (training mode, opset 14) and trained for
--steps AdamW steps on one batch: by PyTorch (eager, the module itself) and
by `tessera onnx train` on the exported file, eagerly and with --graph, in
interleaved rounds at the same thread count, both pinned to that many CPUs. Each side's time is the wall
time of its training loop after the first --warmup steps (Tessera: the
`seconds` of the JSON, minus the warm-up steps' share measured by a run of
--warmup steps alone). Prints one JSON line per (model, threads): medians,
ratios (PyTorch time / Tessera time: > 1 means Tessera is faster), and the
final losses of both sides.

Usage: onnx_train_vs_torch.py [--models cnn,encoder] [--threads 1,2] [--steps 30] [--rounds 3]
  [--tessera build/bin/tessera]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "models"))
from onnx_train_parity import Cnn, Encoder, save_pb  # noqa: E402
from onnx_vs_torch import set_affinity  # noqa: E402  (both sides pinned to the same CPUs)


def make(name):
    torch.manual_seed(0)
    if name == "cnn":
        return Cnn(), "x", torch.randn(32, 3, 32, 32), 10, None
    return (Encoder(vocab=1000, d=128, heads=4, layers=2, classes=10), "ids", torch.randint(0, 1000, (16, 64)), 10,
            {"ids": {0: "batch"}, "logits": {0: "batch"}})


def torch_seconds(model, inp, target, steps, threads):
    torch.set_num_threads(threads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(inp), target)
        loss.backward()
        opt.step()
    return time.perf_counter() - t0, loss.item()


def tessera_seconds(binary, onnx_path, name, tmp, steps, threads, graph):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TESSERA_NUM_THREADS=str(threads))
    cmd = [binary, "onnx", "train", onnx_path, "--input", f"{name}={tmp}/input.pb", "--target", f"{tmp}/target.pb",
           "--loss", "cross-entropy", "--steps", str(steps), "--lr", "1e-3", "--json"] + (["--graph"] if graph else [])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"tessera onnx train failed:\n{r.stderr}")
    j = json.loads(r.stdout)
    return j["seconds"], j["losses"][-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="cnn,encoder")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tessera", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                                       "tessera"))
    a = ap.parse_args()
    for name in a.models.split(","):
        model, input_name, inp, classes, dynamic = make(name)
        target = torch.randint(0, classes, (inp.shape[0],))
        model.train()
        tmp = tempfile.mkdtemp(prefix="onnx-train-bench-")
        path = os.path.join(tmp, "model.onnx")
        torch.onnx.export(model, (inp,), path, input_names=[input_name], output_names=["logits"], opset_version=14,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          dynamic_axes=dynamic)
        save_pb(os.path.join(tmp, "input.pb"), inp.numpy())
        save_pb(os.path.join(tmp, "target.pb"), target.numpy().astype(np.int64))
        state = {k: v.clone() for k, v in model.state_dict().items()}
        all_cpus = os.sched_getaffinity(0)
        for threads in [int(t) for t in a.threads.split(",")]:
            set_affinity(set(sorted(all_cpus)[:threads]))
            rows = {"torch": [], "eager": [], "graph": []}
            losses = {}
            for _ in range(a.rounds):
                for mode in ("eager", "graph"):
                    total, losses[mode] = tessera_seconds(a.tessera, path, input_name, tmp, a.steps, threads,
                                                          mode == "graph")
                    warm, _ = tessera_seconds(a.tessera, path, input_name, tmp, a.warmup, threads, mode == "graph")
                    rows[mode].append(total - warm)
                model.load_state_dict(state)
                total, losses["torch"] = torch_seconds(model, inp, target, a.steps, threads)
                model.load_state_dict(state)
                warm, _ = torch_seconds(model, inp, target, a.warmup, threads)
                model.load_state_dict(state)
                rows["torch"].append(total - warm)
            med = {k: statistics.median(v) for k, v in rows.items()}
            per_step = lambda k: round(med[k] / (a.steps - a.warmup) * 1e3, 2)  # noqa: E731
            print(json.dumps({"model": name, "batch": int(inp.shape[0]), "threads": threads,
                              "steps_timed": a.steps - a.warmup, "torch_ms_per_step": per_step("torch"),
                              "tessera_eager_ms_per_step": per_step("eager"),
                              "tessera_graph_ms_per_step": per_step("graph"),
                              "torch_over_eager": round(med["torch"] / med["eager"], 3),
                              "torch_over_graph": round(med["torch"] / med["graph"], 3),
                              "final_loss": {k: round(v, 6) for k, v in losses.items()},
                              "rounds_s": {k: [round(x, 4) for x in v] for k, v in rows.items()}}), flush=True)
            set_affinity(all_cpus)


if __name__ == "__main__":
    main()

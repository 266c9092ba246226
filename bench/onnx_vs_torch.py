#!/usr/bin/env python3
"""ONNX inference on Tessera against PyTorch 1.13 running the same model.

Debian's libonnx-testdata carries no large models (its real/ cases are
download stubs) and Debian has no onnxruntime, so the large cases are made
here: PyTorch builds the model, torch.onnx.export writes it (opset 13), and
`tessera onnx run --repeat R --json --engine E` runs the file (E: graph, the
model lowered onto Tessera's operators and captured as a graph; interpreter,
node by node) while PyTorch runs the module on the same input, in
interleaved rounds with the same thread count, both pinned to that many
CPUs
(TESSERA_NUM_THREADS / torch.set_num_threads). Prints one JSON line per
(model, threads): both medians, their ratio (PyTorch time / Tessera time:
> 1 means Tessera is faster) and the largest difference between the two
outputs.

Models: resnet50 (torchvision's layout, tests/python/models/torch_resnet.py,
224x224) and bert (torch.nn.TransformerEncoder, d_model 256, 4 heads, 4
layers, sequence 128 — a BERT-style encoder).

Usage: onnx_vs_torch.py [--models resnet50,bert] [--batch 1] [--threads 1,2]
  [--repeat 5] [--rounds 3] [--engines graph,interpreter] [--tessera build/bin/tessera]
Needs Debian's python3-torch and python3-onnx (for writing the input .pb).
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
import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "models"))
from torch_resnet import ARCHS, ResNet  # noqa: E402


class Bert(torch.nn.Module):
    def __init__(self, d=256, heads=4, layers=4, vocab=1000):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def make(name, batch):
    torch.manual_seed(0)
    if name == "resnet50":
        m = ResNet(*ARCHS["resnet50"])
        x = torch.randn(batch, 3, 224, 224)
    elif name == "bert":
        m = Bert()
        x = torch.randint(0, 1000, (batch, 128))
    else:
        raise SystemExit(f"unknown model {name}")
    return m.eval(), x


def set_affinity(cpus):
    """Every thread of this process (PyTorch's pool included; tessera
    subprocesses inherit it) runs on `cpus`: torch.set_num_threads(1) alone
    still lets PyTorch 1.13's encoder fast path use a second core."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that exited meanwhile


def torch_median(m, x, threads, repeat):
    torch.set_num_threads(threads)
    times = []
    with torch.no_grad():
        m(x)
        for _ in range(repeat):
            t0 = time.perf_counter()
            y = m(x)
            times.append(time.perf_counter() - t0)
    return statistics.median(times), y.numpy()


def tessera_median(binary, model_path, input_name, input_pb, out_dir, threads, repeat, engine):
    env = dict(os.environ, TESSERA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    r = subprocess.run([binary, "onnx", "run", model_path, "--input", f"{input_name}={input_pb}", "--repeat",
                        str(repeat + 1), "--output-dir", out_dir, "--json", "--engine", engine], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"tessera onnx run failed:\n{r.stderr}")
    j = json.loads(r.stdout)
    if j["engine"] != engine:
        raise SystemExit(f"tessera onnx run used the {j['engine']} engine, not {engine}: {j.get('engine_note')}")
    times = j["seconds"][1:]  # the first run warms up (the graph engine also captures in two untimed calls)
    y = numpy_helper.to_array(onnx.load_tensor(j["outputs"][0]["file"]))
    return statistics.median(times), y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,bert")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engines", default="graph,interpreter",
                    help="tessera onnx run --engine values to time (graph: the lowered model as a captured graph)")
    ap.add_argument("--tessera", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin",
                                                       "tessera"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tessera-onnx-bench-")
    for name in a.models.split(","):
        m, x = make(name, a.batch)
        path = os.path.join(work, f"{name}.onnx")
        torch.onnx.export(m, x, path, opset_version=13, input_names=["input"], output_names=["output"])
        input_pb = os.path.join(work, f"{name}_input.pb")
        with open(input_pb, "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), "input").SerializeToString())
        engines = a.engines.split(",")
        all_cpus = os.sched_getaffinity(0)
        for threads in [int(t) for t in a.threads.split(",")]:
            set_affinity(set(sorted(all_cpus)[:threads]))
            ts, ps, diff = {e: [] for e in engines}, [], {e: 0.0 for e in engines}
            for _ in range(a.rounds):
                ys = {}
                for e in engines:
                    t, ys[e] = tessera_median(a.tessera, path, "input", input_pb, work, threads, a.repeat, e)
                    ts[e].append(t)
                p, y_p = torch_median(m, x, threads, a.repeat)
                ps.append(p)
                for e in engines:  # this round's outputs against PyTorch's
                    diff[e] = max(diff[e], float(np.max(np.abs(ys[e] - y_p))))
            p = statistics.median(ps)
            for e in engines:
                t = statistics.median(ts[e])
                print(json.dumps({"model": name, "batch": a.batch, "threads": threads, "engine": e,
                                  "tessera_ms": round(t * 1e3, 2), "torch_ms": round(p * 1e3, 2),
                                  "torch_over_tessera": round(p / t, 3), "max_abs_diff": diff[e],
                                  "tessera_rounds_ms": [round(v * 1e3, 2) for v in ts[e]],
                                  "torch_rounds_ms": [round(v * 1e3, 2) for v in ps]}), flush=True)
            set_affinity(all_cpus)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ONNX fine-tuning parity with PyTorch.

A model built in PyTorch is exported with torch.onnx.export (training mode,
opset 14, no constant folding: the file has what the exporter writes — GELU
as Erf, LayerNorm as ReduceMean/Pow/Sqrt, views as Shape/Gather/Concat
arithmetic, embeddings as Gather, BatchNorm with training_mode=1) and then
trained for --steps AdamW steps twice from the same weights on the same
batch: by PyTorch, and by `tessera onnx train` on the exported file, eagerly
and in graph mode (--graph). Every step's loss must agree within --rtol.

  onnx_train_parity.py --tessera build/bin/tessera --model cnn|encoder [--steps N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return self.body(x)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        split = lambda z: z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(q), split(k), split(v)
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Encoder(nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2, classes=7):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.pool, self.head = nn.Linear(d, d), nn.Linear(d, classes)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(torch.tanh(self.pool(x.mean(dim=1))))


def save_pb(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(array).SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--model", choices=["cnn", "encoder"], required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--rtol", type=float, default=1e-4)
    args = ap.parse_args()
    torch.manual_seed(0)
    if args.model == "cnn":
        model, name = Cnn(), "x"
        inp = torch.randn(6, 3, 16, 16)
        dynamic = None
    else:
        model, name = Encoder(), "ids"
        inp = torch.randint(0, 50, (5, 9))
        dynamic = {"ids": {0: "batch"}, "logits": {0: "batch"}}  # the batch stays symbolic: Shape arithmetic
    target = torch.randint(0, 10 if args.model == "cnn" else 7, (inp.shape[0],))
    model.train()
    tmp = tempfile.mkdtemp(prefix="onnx-train-parity-")
    onnx_path = os.path.join(tmp, "model.onnx")
    torch.onnx.export(model, (inp,), onnx_path, input_names=[name], output_names=["logits"], opset_version=14,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, dynamic_axes=dynamic)
    save_pb(os.path.join(tmp, "input.pb"), inp.numpy())
    save_pb(os.path.join(tmp, "target.pb"), target.numpy().astype(np.int64))

    # PyTorch: the same AdamW arithmetic as Tessera's (betas 0.9 / 0.95, eps 1e-8, no decay).
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    torch_losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(inp), target)
        torch_losses.append(loss.item())
        loss.backward()
        opt.step()

    ok = True
    for mode in ([], ["--graph"]):
        cmd = [args.tessera, "onnx", "train", onnx_path, "--input", f"{name}={tmp}/input.pb", "--target",
               f"{tmp}/target.pb", "--loss", "cross-entropy", "--steps", str(args.steps), "--lr", str(args.lr),
               "--json"] + mode
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            print(f"FAIL: {' '.join(cmd)}\n{run.stdout}\n{run.stderr}")
            return 1
        j = json.loads(run.stdout)
        worst = max(abs(a - b) / abs(b) for a, b in zip(j["losses"], torch_losses))
        label = "graph" if mode else "eager"
        print(f"{args.model} {label}: tessera {j['losses'][0]:.6f} -> {j['losses'][-1]:.6f}, "
              f"torch {torch_losses[0]:.6f} -> {torch_losses[-1]:.6f}, worst relative step difference {worst:.2e}, "
              f"{j['parameters']} parameters, graph replays {j['graph_replays']}, "
              f"{j['fused_layer_norms']} decomposed LayerNorms fused, {j['lowered_nodes']} lowered nodes")
        if args.model == "encoder" and j["fused_layer_norms"] != 4:  # 2 blocks x 2 LayerNorms, exported decomposed
            ok = False
            print("  the exported LayerNorms were not fused")
        if worst > args.rtol:
            ok = False
            for s, (a, b) in enumerate(zip(j["losses"], torch_losses)):
                print(f"  step {s + 1}: tessera {a:.7f} torch {b:.7f}")
        if mode and (j["graph_replays"] != args.steps - 2 or j["graph_fallback"]):
            ok = False
            print(f"  graph mode did not replay every step after the first two: {j['graph_fallback']}")
        if len(j["losses"]) != args.steps or not j["losses"][-1] < j["losses"][0]:
            ok = False
            print("  the loss did not fall")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

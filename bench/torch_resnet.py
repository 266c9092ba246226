#!/usr/bin/env python3
"""PyTorch 1.13's training step on torchvision's ResNet layout
(tests/python/models/torch_resnet.py), timed as `tessera train` times its
own (bench/resnet_vs_torch.sh runs both): AdamW, mean cross-entropy, random
images and labels; the steps after the first `--warmup` are timed and
images/s = images / their total time (as `tessera train`'s summary, which
times every step after the first); prints one JSON line.

Usage: torch_resnet.py [--layers 3,4,6,3] [--width 64] [--bottleneck 1]
  [--small-stem 0] [--classes 1000] [--size 224] [--batch 32] [--steps 6]
  [--warmup 1] [--threads N] [--channels-last]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python", "models"))
from torch_resnet import ResNet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="3,4,6,3")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--bottleneck", type=int, default=1)
    ap.add_argument("--small-stem", type=int, default=0)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    layers = [int(v) for v in args.layers.split(",")]
    model = ResNet(bool(args.bottleneck), layers, args.width, bool(args.small_stem), args.classes)
    x = torch.randn(args.batch, 3, args.size, args.size)
    y = torch.randint(0, args.classes, (args.batch,))
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    step_s = sum(times) / len(times)
    print(json.dumps({"framework": "pytorch " + torch.__version__, "threads": torch.get_num_threads(),
                      "channels_last": args.channels_last, "batch": args.batch, "size": args.size,
                      "step_s": step_s, "median_step_s": statistics.median(times),
                      "images_per_s": args.batch / step_s, "loss": loss.item()}))


if __name__ == "__main__":
    main()

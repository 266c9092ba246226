#!/usr/bin/env python3
"""Tessera's ResNet against PyTorch 1.13 on the same weights and input.

Builds torchvision's ResNet layout in plain PyTorch (torch_resnet.py, same
names and v1.5 bottleneck as torchvision), gives every batch norm non-trivial gamma, beta and
running statistics, saves weights, buffers, an input and labels to a
safetensors file, runs `resnet_parity_tool` (Tessera) on it, and compares:
training-mode logits and loss, every parameter's gradient of the mean
cross-entropy, the running statistics after the step, and inference-mode
logits afterwards. Each tensor's error is ||tessera - torch|| / ||torch||
(L2 over the tensor) against a tolerance stated below, and so is the
median over the gradient tensors; the worst tensors are printed. Exit
status 1 on any failure.

Why these tolerances are not at fp32 rounding level for gradients: a ReLU
whose input lies within rounding of 0 (among thousands to millions of
inputs some land within 1e-7) may flip between two correct fp32
implementations. At the last ReLU, where a batch has few positions, that
moves one position's contribution in or out of every upstream gradient:
seen with the tiny model at 16x16, batch 3 (an input of 2e-8 at the last
ReLU), where every gradient moved by 2-4e-3 while Tessera's NCHW and NHWC
paths agree with each other to 1e-7 op by op. So each gradient tensor may
be off by 2e-2, but the median over them must be at rounding level (1e-4;
measured 5e-7 to 6e-6), which a flip deep in the network cannot reach
while a systematic error would. Logits, the loss and the running
statistics are continuous and held to rounding level.

Usage: resnet_parity.py --tool PATH [--arch resnet50|resnet18|tiny]
                        [--size 64] [--batch 2] [--layout NCHW|NHWC]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_resnet import ARCHS, ResNet

# fp32 tolerances of ||tessera - torch|| / ||torch|| per tensor, and of the
# median over the gradient tensors (see above for the ReLU flips).
TOL = {"logits": 1e-4, "loss": 1e-5, "grad": 2e-2, "buffer": 1e-5, "eval_logits": 1e-4}
MEDIAN_GRAD_TOL = 1e-4


DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_safetensors(path, tensors, metadata):
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, t in tensors.items():
        b = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        begin, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[8 + n + begin:8 + n + end]), dtype=torch.float32).reshape(e["shape"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--arch", default="resnet50", choices=sorted(ARCHS))
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", action="store_true", help="Tessera's reference kernels instead of the optimized")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    bottleneck, layers, width, small_stem, classes = ARCHS[args.arch]
    model = ResNet(bottleneck, layers, width, small_stem, classes)
    with torch.no_grad():
        # Non-trivial batch norms (fresh ones are the identity). The last norm
        # of each residual branch gets a small gamma (as torchvision's
        # zero_init_residual, and trained ResNets, keep it): with gammas near
        # 1 everywhere a random 50-layer network at batch 2 is so badly
        # conditioned that two correct fp32 implementations (Tessera's
        # reference and optimized kernels) disagree on gradients by 3e-2.
        for name, m in model.named_modules():
            if isinstance(m, nn.BatchNorm2d):
                last = name.endswith(".bn3") or (not bottleneck and name.endswith(".bn2"))
                m.weight.uniform_(0.05, 0.25) if last else m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(args.batch, 3, args.size, args.size)
    labels = torch.randint(0, classes, (args.batch,))
    state = {k: v.clone() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    tensors = dict(state)
    tensors["input"] = x
    tensors["labels"] = labels
    metadata = {"layers": ",".join(map(str, layers)), "width": str(width), "bottleneck": str(int(bottleneck)),
                "small_stem": str(int(small_stem)), "num_classes": str(classes), "layout": args.layout}

    model.train()
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    ref = {"logits": logits.detach(), "loss": loss.detach()}
    for name, p in model.named_parameters():
        ref["grad." + name] = p.grad.detach()
    for name, b in model.named_buffers():
        if not name.endswith("num_batches_tracked"):
            ref["buffer." + name] = b.detach().clone()
    model.eval()
    with torch.no_grad():
        ref["eval_logits"] = model(x)

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "in.safetensors"), os.path.join(tmp, "out.safetensors")
        save_safetensors(src, tensors, metadata)
        run = subprocess.run([args.tool, src, dst] + (["--reference"] if args.reference else []), capture_output=True,
                             text=True, timeout=1200)
        if run.returncode != 0:
            print(run.stdout + run.stderr, file=sys.stderr)
            sys.exit(f"resnet_parity: the tool failed (exit {run.returncode})")
        got = load_safetensors(dst)

    missing = sorted(set(ref) - set(got))
    if missing:
        sys.exit(f"resnet_parity: tessera did not produce {missing[:5]}")
    rows, failed, grad_errors = [], 0, []
    for name, want in ref.items():
        have = got[name].reshape(want.shape).double()
        want = want.double()
        err = ((have - want).norm() / max(want.norm().item(), 1e-30)).item()
        kind = name.split(".")[0]
        ok = err <= TOL[kind]
        failed += not ok
        rows.append((err / TOL[kind], name, err, ok))
        if kind == "grad":
            grad_errors.append(err)
    rows.sort(reverse=True)
    median = sorted(grad_errors)[len(grad_errors) // 2]
    print(f"{args.arch} {args.layout} batch {args.batch} {args.size}x{args.size}: {len(rows)} tensors compared, "
          f"loss torch {ref['loss'].item():.6f} tessera {got['loss'].item():.6f}, median gradient error {median:.2e} "
          f"(tolerance {MEDIAN_GRAD_TOL:.0e})")
    for _, name, err, ok in rows[:8]:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: relative L2 error {err:.2e} "
              f"(tolerance {TOL[name.split('.')[0]]:.0e})")
    if failed or median > MEDIAN_GRAD_TOL:
        sys.exit(f"resnet_parity: {failed} of {len(rows)} tensors outside tolerance, median gradient error "
                 f"{median:.2e}")
    print("resnet_parity: all within tolerance")


if __name__ == "__main__":
    main()

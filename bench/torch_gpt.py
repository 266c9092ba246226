#!/usr/bin/env python3
"""PyTorch reference for Tessera's training-throughput benchmark.

Trains the same decoder-only GPT (pre-norm blocks, causal attention with
rotary or learned positions, GELU/SwiGLU MLP or top-k MoE FFN with the
Switch load-balancing loss, tied embeddings) as `tessera train` with the same
configuration file and on the same batches, which `tessera data export`
wrote to a binary file. Prints one JSON line with tokens/s and the loss curve.

Usage: torch_gpt.py CONFIG.toml BATCHES.bin --steps N [--threads T] [--warmup W]
"""
import argparse
import json
import os
import math
import struct
import sys
import time
import tomllib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def load_batches(path):
    with open(path, "rb") as f:
        magic, n, b, t = struct.unpack("<4sqqq", f.read(28))
        if magic != b"TSBT":
            sys.exit(f"{path}: not a Tessera batch file")
        data = np.frombuffer(f.read(), dtype=np.int32)
    data = data.reshape(n, 2, b, t)
    return [(torch.from_numpy(d[0].astype(np.int64)), torch.from_numpy(d[1].astype(np.int64))) for d in data]


def rope(x, base=10000.0):
    # x: [B, H, T, Dh], rotate-half layout.
    _, _, t, dh = x.shape
    half = dh // 2
    inv = base ** (-torch.arange(0, half, dtype=torch.float32) * 2.0 / dh)
    ang = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class RmsNorm(nn.Module):
    # torch 1.13 has no nn.RMSNorm.
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg, d):
    return nn.LayerNorm(d) if cfg.get("norm", "layernorm") == "layernorm" else RmsNorm(d)


class Attention(nn.Module):
    # Separate q/k/v/o projections as in Tessera's CausalSelfAttention.
    def __init__(self, d, h, use_rope, bias=False):
        super().__init__()
        self.h, self.use_rope = h, use_rope
        self.wq = nn.Linear(d, d, bias=bias)
        self.wk = nn.Linear(d, d, bias=bias)
        self.wv = nn.Linear(d, d, bias=bias)
        self.wo = nn.Linear(d, d, bias=bias)
        self.register_buffer("mask", None, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        dh = d // self.h
        q, k, v = (w(x).view(b, t, self.h, dh).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        if self.use_rope:
            q, k = rope(q), rope(k)
        # torch 1.13 has no scaled_dot_product_attention: the standard masked form.
        if self.mask is None or self.mask.shape[0] != t:
            self.mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(dh)) + self.mask, dim=-1)
        return self.wo((att @ v).transpose(1, 2).reshape(b, t, d))


class Mlp(nn.Module):
    def __init__(self, d, ff, act, bias=False):
        super().__init__()
        self.act = act
        self.gate = nn.Linear(d, ff, bias=bias) if act == "swiglu" else None
        self.up = nn.Linear(d, ff, bias=bias)
        self.down = nn.Linear(ff, d, bias=bias)

    def forward(self, x):
        if self.act == "swiglu":
            h = F.silu(self.gate(x)) * self.up(x)
        else:
            h = F.gelu(self.up(x), approximate="tanh")
        return self.down(h)


class Moe(nn.Module):
    def __init__(self, d, ff, act, experts, top_k):
        super().__init__()
        self.top_k, self.e = top_k, experts
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList([Mlp(d, ff, act) for _ in range(experts)])

    def forward(self, x):
        b, t, d = x.shape
        xf = x.reshape(-1, d)
        probs = F.softmax(self.router(xf), dim=-1)
        w, idx = probs.topk(self.top_k, dim=-1)
        w = w / w.sum(-1, keepdim=True)
        out = torch.zeros_like(xf)
        frac = torch.zeros(self.e)
        for e in range(self.e):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            frac[e] = rows.numel() / (xf.shape[0] * self.top_k)
            if rows.numel():
                out.index_add_(0, rows, self.experts[e](xf[rows]) * w[rows, slot, None])
        aux = self.e * (frac.detach() * probs.mean(0)).sum()
        return out.view(b, t, d), aux


class Block(nn.Module):
    def __init__(self, cfg, moe):
        super().__init__()
        d = cfg["d_model"]
        self.n1, self.n2 = make_norm(cfg, d), make_norm(cfg, d)
        bias = cfg.get("bias", False)  # model.bias: biases in every linear layer, as Tessera
        self.attn = Attention(d, cfg["n_heads"], cfg.get("rope", True), bias)
        act = cfg.get("activation", "gelu")
        if moe:
            m = cfg["moe"]
            self.ffn = Moe(d, m.get("d_ff_expert", cfg["d_ff"]), act, m["num_experts"], m["top_k"])
        else:
            self.ffn = Mlp(d, cfg["d_ff"], act, bias)
        self.is_moe = moe

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        if self.is_moe:
            y, aux = self.ffn(self.n2(x))
            return x + y, aux
        return x + self.ffn(self.n2(x)), torch.zeros(())


class Gpt(nn.Module):
    def __init__(self, cfg, moe_layers):
        super().__init__()
        d = cfg["d_model"]
        self.cfg = cfg
        self.emb = nn.Embedding(cfg["vocab_size"], d)
        self.pos = None if cfg.get("rope", True) else nn.Embedding(cfg["seq_len"], d)
        self.blocks = nn.ModuleList([Block(cfg, i in moe_layers) for i in range(cfg["n_layers"])])
        self.nf = make_norm(cfg, d)
        self.n_moe = max(1, len(moe_layers))
        self.aux_coef = cfg.get("moe", {}).get("aux_loss_coef", 0.01)
        std = cfg.get("init_std", 0.02)
        for m in self.modules():  # same init scheme as Tessera: N(0, init_std), norms at 1
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids, targets):
        x = self.emb(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(ids.shape[1]))
        aux = torch.zeros(())
        for blk in self.blocks:
            x, a = blk(x)
            aux = aux + a
        logits = self.nf(x) @ self.emb.weight.t()
        ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1), ignore_index=-100)
        return ce + self.aux_coef * aux / self.n_moe, ce


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("batches")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--backend", default="gloo", help="torch.distributed backend: gloo or tessera (tessera.torch)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with open(args.config, "rb") as f:
        cfg = tomllib.load(f)
    mcfg = cfg["model"]
    moe = mcfg.get("moe", {})
    if moe.get("num_experts", 0) > 0:
        every = moe.get("every", 1)
        moe_layers = set(moe.get("layers", [])) or {i for i in range(mcfg["n_layers"]) if (i + 1) % every == 0}
    else:
        moe_layers = set()
    model = Gpt(mcfg, moe_layers)
    # Under torchrun (WORLD_SIZE > 1): DistributedDataParallel over Gloo, each
    # rank taking its share of every global batch (the data-parallel
    # baseline for bench/compare_torch_ddp.sh).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        import torch.distributed as dist
        if args.backend == "tessera":
            import tessera.torch  # noqa: F401  registers the backend (PYTHONPATH=build/python)
        dist.init_process_group(args.backend)
        # MoE experts that receive no token in a step have no gradient.
        model = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=bool(moe_layers))
    tr = cfg.get("train", {})
    opt = torch.optim.AdamW(model.parameters(), lr=tr.get("lr", 1e-3), weight_decay=tr.get("weight_decay", 0.1),
                            betas=(tr.get("beta1", 0.9), tr.get("beta2", 0.95)))
    batches = load_batches(args.batches)
    tokens, elapsed, losses = 0, 0.0, []
    for step in range(args.warmup + args.steps):
        ids, tg = batches[step % len(batches)]
        if world > 1:
            share = ids.shape[0] // world
            ids, tg = ids[rank * share:(rank + 1) * share], tg[rank * share:(rank + 1) * share]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, ce = model(ids, tg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr.get("grad_clip", 1.0))
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            elapsed += dt
            tokens += ids.numel() * world
        losses.append(float(ce))
    if rank != 0:
        return
    print(json.dumps({"framework": f"pytorch {torch.__version__}", "threads": args.threads, "world": world,
                      "backend": args.backend if world > 1 else None,
                      "steps": args.steps, "tokens_per_s": tokens / elapsed,
                      "step_ms": 1000 * elapsed / args.steps, "losses": losses,
                      "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()

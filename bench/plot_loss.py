#!/usr/bin/env python3
"""Draws a run's loss curve (and held-out metric) from runs/<name>/metrics.jsonl
as a self-contained SVG, and prints a compact table of it.

Usage: plot_loss.py METRICS.jsonl OUT.svg [--title TITLE]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics")
    ap.add_argument("out")
    ap.add_argument("--title", default="training loss")
    args = ap.parse_args()
    steps, losses, evals = [], [], []
    with open(args.metrics) as f:
        for line in f:
            row = json.loads(line)
            if "loss" in row:
                steps.append(row["step"])
                losses.append(row["loss"])
            if "eval_metric" in row:
                evals.append((row["step"], row["eval_loss"], row["eval_metric"]))
    w, h, pad = 720, 360, 50
    max_step = max(steps)
    max_loss = max(losses)

    def x(s):
        return pad + (w - 2 * pad) * s / max_step

    def y(v, top):
        return h - pad - (h - 2 * pad) * v / top

    pts = " ".join(f"{x(s):.1f},{y(l, max_loss):.1f}" for s, l in zip(steps, losses))
    epts = " ".join(f"{x(s):.1f},{y(m, 1.0):.1f}" for s, _, m in evals)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{args.title}</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
        f'<line x1="{w - pad}" y1="{pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
        f'<polyline fill="none" stroke="steelblue" stroke-width="1.5" points="{pts}"/>',
        f'<polyline fill="none" stroke="darkorange" stroke-width="2" points="{epts}"/>',
        f'<text x="{pad}" y="{h - pad + 30}">step 0</text>',
        f'<text x="{w - pad}" y="{h - pad + 30}" text-anchor="end">step {max_step}</text>',
        f'<text x="{pad - 5}" y="{pad}" text-anchor="end">{max_loss:.2f}</text>',
        f'<text x="{pad - 5}" y="{h - pad}" text-anchor="end">0</text>',
        f'<text x="{w - pad + 5}" y="{pad}">1.0</text>',
        f'<text x="{pad + 10}" y="{pad + 15}" fill="steelblue">train loss (left axis)</text>',
        f'<text x="{pad + 10}" y="{pad + 30}" fill="darkorange">held-out exact match (right axis)</text>',
        "</svg>",
    ]
    with open(args.out, "w") as f:
        f.write("\n".join(parts) + "\n")
    print("| step | train loss | held-out loss | held-out metric |")
    print("|---:|---:|---:|---:|")
    ev = {s: (l, m) for s, l, m in evals}
    for s, l in zip(steps, losses):
        if s == 1 or s % 100 == 0 or s in ev:
            el, em = ev.get(s, (None, None))
            print(f"| {s} | {l:.4f} | {'' if el is None else f'{el:.4f}'} | {'' if em is None else f'{em:.4f}'} |")


if __name__ == "__main__":
    main()

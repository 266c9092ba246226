#!/usr/bin/env python3
"""The twin's validation matrix (docs/twin.md, issue 13).

Runs short `tessera train` jobs of MATRIX (below: 14 configurations that
differ in width, depth, sequence, heads, dense vs MoE, micro-batch and
layout, from 1 process to 8 ranks; none of them is used to fit anything:
`tessera sim calibrate` measures generic sweeps and probes of its own) and
compares each job's median step time and peak memory with what `tessera sim
predict` says from a calibration made in the same run.

  bench/twin_matrix.py [--bin build/bin/tessera] [--rounds 2] [--steps 14]
                       [--calibrate | --cluster configs/clusters/this-machine.toml]
                       [--only NAME,NAME] [--json OUT.json]

The machine drifts 10-30 % over minutes, so the matrix runs in rounds: each
round (with --calibrate) calibrates first, then runs every configuration
once and predicts it from that round's calibration. Per configuration:
median over rounds of the measured median step (first 4 steps skipped) and
of the paired error predicted / measured - 1.

Baselines, fitted on the measured steps of this very run (an oracle that
has seen the answers, which the twin has not): the best constant step time,
and time proportional to the model FLOPs of a step (one fitted constant).
Each baseline's constant minimizes its median |error| over the configurations.

Checks (exit status 1 when one fails): median |error| <= 10 % and max <= 25 %;
the twin's median |error| <= 0.5 x the constant's and <= 0.7 x the
FLOP-proportional baseline's; predicted peak memory within 10 % of the
measured peak (the largest rank's allocator high-water mark).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs/train/default.toml")


def model(d, layers, heads, seq, d_ff=None, experts=0, top_k=1, every=2, d_ff_expert=None):
    o = [f"model.d_model={d}", f"model.n_layers={layers}", f"model.n_heads={heads}", f"model.seq_len={seq}",
         f"model.d_ff={d_ff or 3 * d}", f"model.moe.num_experts={experts}"]
    if experts:
        o += [f"model.moe.top_k={top_k}", f"model.moe.every={every}", f"model.moe.d_ff_expert={d_ff_expert or 2 * d}"]
    return o


def layout(dp=1, tp=1, pp=1, ep=1, zero=0, sp=False, recompute="none", mb=4, gb=16):
    return [f"parallel.dp={dp}", f"parallel.tp={tp}", f"parallel.pp={pp}", f"parallel.ep={ep}",
            f"parallel.zero={zero}", f"parallel.sequence_parallel={'true' if sp else 'false'}",
            f"train.recompute={recompute}", f"train.micro_batch={mb}", f"train.global_batch={gb}"]


# name -> (processes, overrides of configs/train/default.toml)
MATRIX = {
    "d64-single": (1, model(64, 2, 2, 32) + layout(mb=8, gb=32)),
    "d256-moe8top1-single": (1, model(256, 4, 8, 64, experts=8, top_k=1) + layout(mb=4, gb=8)),
    "d512-single": (1, model(512, 2, 8, 128) + layout(mb=2, gb=4)),
    "d128-dp2-z0-recomp": (2, model(128, 4, 4, 128) + layout(dp=2, zero=0, recompute="full", mb=2, gb=8)),
    "d96-moe4top2-dp2-z3": (2, model(96, 4, 3, 64, experts=4, top_k=2) + layout(dp=2, zero=3, mb=4, gb=16)),
    "d256-tp2-sp": (2, model(256, 3, 8, 64) + layout(tp=2, sp=True, mb=4, gb=8)),
    "d192-pp2-recomp": (2, model(192, 6, 6, 64) + layout(pp=2, recompute="selective", mb=2, gb=8)),
    "d128-moe16top2-dp2-ep2": (2, model(128, 4, 4, 64, experts=16, top_k=2) + layout(dp=2, ep=2, zero=1, mb=4, gb=16)),
    "d64-seq256-dp4-z2": (4, model(64, 2, 4, 256) + layout(dp=4, zero=2, mb=1, gb=8)),
    "d128-pp4": (4, model(128, 8, 4, 32) + layout(pp=4, mb=2, gb=16)),
    "d256-tp2-pp2": (4, model(256, 4, 4, 64) + layout(tp=2, pp=2, mb=2, gb=8)),
    "d128-moe2top1-dp2-tp2": (4, model(128, 4, 4, 32, experts=2, top_k=1) + layout(dp=2, tp=2, ep=2, zero=1, mb=4, gb=16)),
    "make-run": (8, layout(dp=2, tp=2, pp=2, ep=2, zero=1, mb=4, gb=32) + model(128, 4, 4, 40, d_ff=384,
                                                                                 experts=4, top_k=2, d_ff_expert=256)),
    "d64-dp8-z1": (8, model(64, 2, 2, 32) + layout(dp=8, zero=1, mb=2, gb=32)),
}


def run(cmd, cwd=None, timeout=900):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def wait_quiet(limit_s=60):
    """Until no other process is runnable for 1 s (the host is shared)."""
    deadline = time.time() + limit_s
    streak = 0
    while time.time() < deadline:
        with open("/proc/loadavg") as f:
            running = int(f.read().split()[3].split("/")[0])
        streak = streak + 1 if running <= 1 else 0
        if streak >= 4:
            return
        time.sleep(0.25)
    print(f"# warning: the machine stayed busy: {open('/proc/loadavg').read().strip()}", file=sys.stderr)


def measure(binary, nproc, sets, work, steps):
    os.makedirs(work, exist_ok=True)
    args = [binary, "train", CONFIG] + sets + ["--set", "name=run"]
    if nproc > 1:
        args = [binary, "launch", "--nproc", str(nproc), "--"] + args
    run(args, cwd=work)
    rundir = os.path.join(work, "runs", "run")
    steps_s = [json.loads(l)["step_s"] for l in open(os.path.join(rundir, "metrics.jsonl")) if '"step_s"' in l]
    summary = json.load(open(os.path.join(rundir, "summary.json")))
    peak = summary["peak_memory_bytes"]
    if "parallel" in summary:
        peak = max(r["peak_memory_bytes"] for r in summary["parallel"]["ranks"])
    return statistics.median(steps_s[4:] if len(steps_s) > 8 else steps_s), peak


def fit_scale(xs, ys):
    """The c minimizing median |c x / y - 1| (candidates: every y / x)."""
    best = None
    for c in (y / x for x, y in zip(xs, ys)):
        err = statistics.median(abs(c * x / y - 1) for x, y in zip(xs, ys))
        if best is None or err < best[0]:
            best = (err, c)
    return best[1]


def markdown(path):
    """Prints a --json result as the markdown table docs/twin.md quotes."""
    r = json.load(open(path))
    print("| config | ranks | predicted s | measured s | twin | best constant | FLOP-prop. | memory pred / meas MiB | memory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in r["configs"]:
        print(f"| {t['config']} | {t['ranks']} | {t['predicted_s']:.4f} | {t['measured_s']:.4f} | "
              f"{100 * t['error']:+.1f} % | {100 * t['constant_error']:+.1f} % | {100 * t['flops_error']:+.1f} % | "
              f"{t['predicted_memory_bytes'] / 2**20:.1f} / {t['measured_memory_bytes'] / 2**20:.1f} | "
              f"{100 * t['memory_error']:+.1f} % |")
    tw, co, fl, me = r["twin"], r["constant"], r["flops"], r["memory"]
    print(f"| **median / max \\|error\\|** | | | | **{100 * tw[0]:.1f} / {100 * tw[1]:.1f} %** | "
          f"{100 * co[0]:.1f} / {100 * co[1]:.0f} % | {100 * fl[0]:.1f} / {100 * fl[1]:.1f} % | | "
          f"{100 * me[0]:.1f} / {100 * me[1]:.1f} % |")
    print()
    print(f"Step-time span {r['span']:.1f}x, {r['rounds']} round(s). Checks: " +
          ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in r["checks"].items()))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin/tessera"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--cluster", default=os.path.join(ROOT, "configs/clusters/this-machine.toml"))
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="", help="render a --json result file as docs' markdown and exit")
    a = ap.parse_args()
    if a.markdown:
        return markdown(a.markdown)
    binary = os.path.abspath(a.bin)
    names = [n for n in MATRIX if not a.only or n in a.only.split(",")]
    # A minimal final evaluation: its forward pass would otherwise set the
    # allocator peak (eval batch 64); the twin predicts the training step.
    common = [f"train.steps={a.steps}", "train.log_every=1000", "eval.every=0", "eval.samples=4", "eval.batch=4",
              "parallel.rebalance=false"]
    work = tempfile.mkdtemp(prefix="twin_matrix.")
    rows = {n: [] for n in names}  # name -> [(predicted_s, measured_s, predicted_bytes, measured_bytes, flops)]
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {os.uname().nodename} load {open('/proc/loadavg').read().strip()}")
    for r in range(a.rounds):
        cluster = a.cluster
        if a.calibrate:
            cluster = os.path.join(work, f"round{r}.toml")
            wait_quiet()
            out = run([binary, "sim", "calibrate", "--out", cluster, "--ranks", "8"])
            print(f"# round {r}: {out.strip().splitlines()[-1]}")
        for n in names:
            nproc, overrides = MATRIX[n]
            sets = []
            for kv in overrides + common:
                sets += ["--set", kv]
            pred = json.loads(run([binary, "sim", "predict", "--cluster", cluster, CONFIG] + sets + ["--json"]))
            wait_quiet()
            step, peak = measure(binary, nproc, sets, os.path.join(work, f"{n}-{r}"), a.steps)
            rows[n].append((pred["step_time_s"], step, pred.get("peak_memory_bytes", 0), peak, pred["model_flops"]))
            print(f"#   {n:<24} predicted {pred['step_time_s']:.4f} s measured {step:.4f} s "
                  f"({100 * (pred['step_time_s'] / step - 1):+.1f} %), memory {pred.get('peak_memory_bytes', 0) / 2**20:.1f} "
                  f"/ {peak / 2**20:.1f} MiB", flush=True)

    med = {n: (statistics.median(x[1] for x in v), statistics.median(x[4] for x in v)) for n, v in rows.items()}
    const_c = fit_scale([1.0] * len(names), [med[n][0] for n in names])
    flop_c = fit_scale([med[n][1] for n in names], [med[n][0] for n in names])
    table = []
    for n in names:
        v = rows[n]
        measured, flops = med[n]
        err = statistics.median(p / m - 1 for p, m, _, _, _ in v)
        mem_err = statistics.median(pb / mb - 1 for _, _, pb, mb, _ in v)
        table.append({"config": n, "ranks": MATRIX[n][0], "predicted_s": statistics.median(x[0] for x in v),
                      "measured_s": measured, "error": err, "constant_error": const_c / measured - 1,
                      "flops_error": flop_c * flops / measured - 1,
                      "predicted_memory_bytes": statistics.median(x[2] for x in v),
                      "measured_memory_bytes": statistics.median(x[3] for x in v), "memory_error": mem_err,
                      "rounds": [{"predicted_s": p, "measured_s": m} for p, m, _, _, _ in v]})
    print(f"\n{'config':<24} {'ranks':>5} {'predicted':>9} {'measured':>9} {'twin':>7} {'const':>7} {'flops':>7}"
          f" {'mem pred':>9} {'mem meas':>9} {'mem err':>7}")
    for t in table:
        print(f"{t['config']:<24} {t['ranks']:>5} {t['predicted_s']:9.4f} {t['measured_s']:9.4f} "
              f"{100 * t['error']:+6.1f}% {100 * t['constant_error']:+6.1f}% {100 * t['flops_error']:+6.1f}% "
              f"{t['predicted_memory_bytes'] / 2**20:8.1f}M {t['measured_memory_bytes'] / 2**20:8.1f}M "
              f"{100 * t['memory_error']:+6.1f}%")

    def stats(key):
        errs = [abs(t[key]) for t in table]
        return statistics.median(errs), max(errs)

    twin, const, flop, mem = stats("error"), stats("constant_error"), stats("flops_error"), stats("memory_error")
    span = max(med[n][0] for n in names) / min(med[n][0] for n in names)
    print(f"\nstep-time span {span:.1f}x over {len(names)} configurations, {a.rounds} round(s)")
    print(f"median / max |error|: twin {100 * twin[0]:.1f} / {100 * twin[1]:.1f} %, best constant "
          f"{100 * const[0]:.1f} / {100 * const[1]:.1f} %, FLOP-proportional {100 * flop[0]:.1f} / {100 * flop[1]:.1f} %,"
          f" memory {100 * mem[0]:.1f} / {100 * mem[1]:.1f} %")
    checks = {
        "median_error_le_10pct": twin[0] <= 0.10,
        "max_error_le_25pct": twin[1] <= 0.25,
        "beats_constant_2x": twin[0] <= 0.5 * const[0],
        "beats_flops_1.43x": twin[0] <= 0.7 * flop[0],
        "memory_within_10pct": mem[1] <= 0.10,
    }
    print("checks: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"configs": table, "span": span, "twin": twin, "constant": const, "flops": flop,
                       "memory": mem, "checks": checks, "rounds": a.rounds}, f, indent=1)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

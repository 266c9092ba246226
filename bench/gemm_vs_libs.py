#!/usr/bin/env python3
"""Tessera's GEMM against OpenBLAS, BLIS and oneDNN at the brief's shapes
(docs/perf.md "Tile GEMM").

Every implementation and library setting runs in its own gemm_compare
process (OpenBLAS's idle pool threads slow whatever shares its process),
the processes alternating round by round so the machine's drift hits all
alike; each process reports the median of its timed calls, and the figure
of an implementation is the median over rounds. OpenBLAS runs both with the
environment's OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE and with them unset; BLIS
with BLIS_ARCH_TYPE=skx (BLIS 0.9 needs it on Zen 5); the best library
figure is the bar. Tessera tunes each shape on its first warm-up into a
fresh cache (never timed).

  bench/gemm_vs_libs.py [--rounds 3] [--calls 3] [--threads 2] [--shapes 4096x4096x4096,...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin", "gemm_compare")


def run(shape, dtype, threads, calls, libs, env_extra, drop=()):
    m, n, k = shape
    env = dict(os.environ)
    for key in drop:
        env.pop(key, None)
    env.update(env_extra)
    cmd = [BIN, "--m", str(m), "--n", str(n), "--k", str(k), "--dtype", dtype, "--threads", str(threads),
           "--rounds", str(calls), "--libs", libs, "--json"]
    if libs:
        cmd.append("--no-tessera")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    return j, {r["impl"]: r["gflops_median"] for r in j[dtype]["rows"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,4096x16384x4096")
    a = ap.parse_args()
    if not os.access(BIN, os.X_OK):
        sys.exit(f"build first: {BIN} missing")
    cache = tempfile.mkdtemp()
    os.environ["TESSERA_TUNE_CACHE"] = os.path.join(cache, "tune.json")
    unset = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    # (label, dtype list, libs, extra env, env keys dropped)
    setups = [
        ("tessera", ["f32", "bf16", "int8"], "", {}, ()),
        ("openblas (env as set)", ["f32"], "openblas", {}, ()),
        ("openblas (CORETYPE unset)", ["f32"], "openblas", {}, unset),
        ("blis (skx)", ["f32"], "blis", {"BLIS_ARCH_TYPE": "skx"}, ()),
        ("onednn", ["f32", "bf16", "int8"], "onednn", {}, ()),
    ]
    print(f"# gemm_vs_libs: {a.threads} threads, {a.rounds} rounds x {a.calls} calls per process")
    for text in a.shapes.split(","):
        shape = tuple(int(x) for x in text.split("x"))
        results = {}  # (label, dtype) -> [gflops per round]
        peak = {}
        config = {}
        for r in range(a.rounds):
            order = setups[r % len(setups):] + setups[:r % len(setups)]
            for label, dtypes, libs, extra, drop in order:
                for dt in dtypes:
                    j, rows = run(shape, dt, a.threads, a.calls, libs, extra, drop)
                    peak.setdefault("fp32", []).append(j["peak_fp32_gflops"])
                    peak.setdefault("bf16", []).append(j["peak_bf16_gflops"])
                    if not libs:
                        config[dt] = j[dt]["config"]
                    for impl, g in rows.items():
                        results.setdefault((label, dt), []).append(g)
        m, n, k = shape
        pf, pb = statistics.median(peak["fp32"]), statistics.median(peak["bf16"])
        print(f"\n## M={m} N={n} K={k}: measured peak fp32 {pf:.0f}, bf16 {pb:.0f} GFLOP/s")
        print("| dtype | implementation | GFLOP/s (median of rounds) | Tessera / it |")
        print("|---|---|---:|---:|")
        for dt in ["f32", "bf16", "int8"]:
            t = statistics.median(results[("tessera", dt)])
            best = 0
            for label, dtypes, *_ in setups:
                if dt not in dtypes:
                    continue
                g = statistics.median(results[(label, dt)])
                ratio = "" if label == "tessera" else f"{t / g:.3f}"
                if label != "tessera":
                    best = max(best, g)
                print(f"| {dt} | {label} | {g:.1f} | {ratio} |")
            extra = f"; {100 * t / (pb if dt == 'bf16' else pf):.1f} % of peak" if dt != "int8" else ""
            print(f"| {dt} | **Tessera / best library** | | **{t / best:.3f}**{extra} |")
        tf = statistics.median(results[("tessera", "f32")])
        print(f"\nTessera bf16 / fp32 = {statistics.median(results[('tessera', 'bf16')]) / tf:.2f}, "
              f"int8 / fp32 = {statistics.median(results[('tessera', 'int8')]) / tf:.2f}; configs: {config}")


if __name__ == "__main__":
    main()

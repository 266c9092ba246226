#!/usr/bin/env python3
"""Simulator scale (docs/perf.md "Simulator scale", docs/sim.md): one
training step replayed with flows by `tessera sim step`, as a user runs it,
the full replay (--full-flows: every rank, every collective step) against
the reduced one (--flows: representative dp replicas, merged ring steps),
on the Ascend 950 clusters of 64 / 512 / 4,096 super-nodes
(configs/clusters/ascend950-ubl128{,-65536,-524288}.toml). Plan: 128 layers,
h 16384, s 4096, V 128000, tp 16 x pp 8, dp = cards / 128, 64 micro-batches
of 1 per replica. Each run is timed by /usr/bin/time (wall, peak RSS).

    bench/sim_scale.py [--bin build/bin/tessera] [--cards 8192,65536,524288]
                       [--full-up-to 65536] [--routing adaptive|ecmp] [--each]

Prints one row per run and, per size with both, the reduced step time's
relative difference from the full one. --each adds, where the full replay
runs, the replay with only the ring steps merged (--flows --replicas dp:
every pipeline simulated), so the two reductions' errors show apart. Exit status 1 when a check misses:
reduced within 2 % of full; 524,288 cards reduced in < 300 s and < 16 GiB.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTERS = {8192: "ascend950-ubl128", 65536: "ascend950-ubl128-65536", 524288: "ascend950-ubl128-524288"}
PLAN = """[model]
layers = 128
hidden = 16384
seq = 4096
vocab = 128000
[parallel]
dp = {dp}
tp = 16
pp = 8
micro_batch = 1
global_batch = {batch}
"""


def run(binary, cluster, plan, mode, routing):
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        cmd = ["/usr/bin/time", "-f", "%e %M", "-o", t.name, binary, "sim", "step", "--cluster", cluster,
               "--plan", plan, *mode.split(), "--routing", routing, "--json"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        wall, rss_kib = t.read().split()[-2:]
    r = json.loads(out)
    r["wall_s"], r["rss_gib"] = float(wall), int(rss_kib) / 2**20
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/bin/tessera"))
    ap.add_argument("--cards", default="8192,65536,524288")
    ap.add_argument("--full-up-to", type=int, default=65536)
    ap.add_argument("--routing", default="adaptive")
    ap.add_argument("--each", action="store_true")
    a = ap.parse_args()
    ok = True
    print(f"{'cards':>8} {'replay':>8} {'wall_s':>8} {'rss_GiB':>8} {'step_s':>10} {'dp_ar_s':>8} "
          f"{'pipelines':>9} {'flows':>11} {'step_diff':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for cards in (int(c) for c in a.cards.split(",")):
            dp = cards // 128
            plan = os.path.join(tmp, f"plan-{cards}.toml")
            with open(plan, "w") as f:
                f.write(PLAN.format(dp=dp, batch=dp * 64))
            cluster = os.path.join(ROOT, "configs/clusters", CLUSTERS[cards] + ".toml")
            modes = [("reduced", "--flows")]
            if cards <= a.full_up_to:
                modes += ([("merged", f"--flows --replicas {dp}")] if a.each else []) + [("full", "--full-flows")]
            res = {}
            for name, flag in modes:
                r = res[name] = run(a.bin, cluster, plan, flag, a.routing)
                diff = ""
                if name == "full":  # of the reduced replay (and of the merged-only one), against the full
                    d = res["reduced"]["step_time_s"] / r["step_time_s"] - 1
                    diff = f"{100 * d:+.4f}%"
                    if "merged" in res:
                        diff += f" (merged only {100 * (res['merged']['step_time_s'] / r['step_time_s'] - 1):+.4f}%)"
                    ok &= abs(d) < 0.02
                fr = r["flow_replay"]
                print(f"{cards:>8} {name:>8} {r['wall_s']:>8.2f} {r['rss_gib']:>8.2f} {r['step_time_s']:>10.4f} "
                      f"{r['dp_comm_s']:>8.4f} {fr['simulated_ranks']:>9} {fr['flows']:>11} {diff:>9}", flush=True)
            if cards == 524288:
                ok &= res["reduced"]["wall_s"] < 300 and res["reduced"]["rss_gib"] < 16
    print("checks:", "pass" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Checkpoint save / load throughput against this machine's disk: runs
# build/bin/checkpoint_bench RUNS times and prints the table of docs/perf.md
# ("Save and load throughput against the disk, same run"): per run the
# reference write+fsync, the save, the reference cold read, the load with one
# worker per core (ReadMany, Arg 0) and with one worker (Arg 1), each
# Tessera figure's ratio to the same run's reference, and the median ratios.
# Rates are Google Benchmark's bytes_per_second (M = 2^20 bytes). Writes and
# reads 256 MiB per benchmark in a temporary directory: run on an idle disk.
#   bench/checkpoint_throughput.sh [RUNS=6]          (BENCH=build/bin/checkpoint_bench)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-6}
BENCH=${BENCH:-build/bin/checkpoint_bench}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$RUNS"); do
  "$BENCH" --benchmark_format=json > "$TMP/run$r.json"
done
python3 - "$TMP" "$RUNS" <<'EOF'
import json, statistics, sys
root, runs = sys.argv[1], int(sys.argv[2])
def rates(path):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        out[b["name"].split("/iterations")[0]] = b["bytes_per_second"]
    return out
def fmt(v):
    m = v / 1048576.0
    return f"{m:.0f} MB/s" if m < 1000 else f"{m / 1024:.2f} GB/s"
keys = ["BM_ReferenceWriteFsync", "BM_CheckpointSave", "BM_ReferenceReadCold", "BM_CheckpointLoadCold/0",
        "BM_CheckpointLoadCold/1"]
print("| run | ref write+fsync | save | save / ref | ref cold read | load, 1 worker per core | load / ref | "
      "load, 1 worker | 1 worker / ref |")
print("|---|---|---|---|---|---|---|---|---|")
ratios = [[], [], []]
for r in range(1, runs + 1):
    x = rates(f"{root}/run{r}.json")
    w, s, rd, l0, l1 = (x[k] for k in keys)
    q = [s / w, l0 / rd, l1 / rd]
    for i, v in enumerate(q):
        ratios[i].append(v)
    print(f"| {r} | {fmt(w)} | {fmt(s)} | {q[0]:.2f} | {fmt(rd)} | {fmt(l0)} | {q[1]:.2f} | {fmt(l1)} | {q[2]:.2f} |")
m = [statistics.median(v) for v in ratios]
print(f"| median | | | **{m[0]:.2f}** | | | **{m[1]:.2f}** | | {m[2]:.2f} |")
EOF

#!/usr/bin/env bash
# Graph mode against eager (docs/perf.md, "Graph mode"): bench/graph_mode_bench
# on the default config's model (MoE blocks stay eager), its dense variant,
# at micro-batches 4 and 32, with the recompute planner on and off (the
# default); then the 8-rank default run (`make run`'s job, STEPS steps,
# default 200) with and without train.graph, alternated. Prints markdown
# tables of medians.
#   [STEPS=200] bench/graph_mode.sh [BUILD_DIR] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PAIRS=${2:-3}
# Steps of the 8-rank runs: the first two calls of each segment capture and
# check (eager + graph), so a short run charges graph mode for them (60
# steps measured 0.96x where 200 steps measured 1.03x).
STEPS=${STEPS:-200}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
DENSE=(--set model.moe.num_experts=0 --set parallel.ep=1)
i=0
run() {  # label, then bench arguments
  local label=$1
  shift
  for r in $(seq "$PAIRS"); do
    i=$((i + 1))
    "$BUILD/bin/graph_mode_bench" --repeats 21 --json "$TMP/$i.json" "$@" >/dev/null
    echo "$label $TMP/$i.json" >>"$TMP/index.txt"
  done
}
RC=(--set train.graph_recompute_budget=0)
run "default (MoE), mb 4" --micro-batch 4
run "default (MoE), mb 4, recompute" --micro-batch 4 "${RC[@]}"
run "dense, mb 4" --micro-batch 4 "${DENSE[@]}"
run "dense, mb 4, recompute" --micro-batch 4 "${DENSE[@]}" "${RC[@]}"
run "dense, mb 32" --micro-batch 32 "${DENSE[@]}"
run "dense, mb 32, recompute" --micro-batch 32 "${DENSE[@]}" "${RC[@]}"
"$PY" - "$TMP/index.txt" <<'PYEOF'
import collections, json, statistics as st, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    label, path = line.rsplit(" ", 1)
    rows.setdefault(label, []).append(json.load(open(path.strip())))
print("| model, micro-batch | eager ms | graph ms | speed-up | eager peak MiB | graph peak MiB | memory | graphs | arena / peak-live |")
print("|---|---|---|---|---|---|---|---|---|")
for label, runs in rows.items():
    m = lambda k: st.median(r[k] for r in runs)
    print(f"| {label} | {m('eager_ms'):.2f} | {m('graph_ms'):.2f} | {m('speedup'):.3f}x | "
          f"{m('eager_peak_bytes')/2**20:.2f} | {m('graph_peak_bytes')/2**20:.2f} | {m('memory_ratio'):.3f}x | "
          f"{runs[0]['graph_segments']}/{runs[0]['segments']} | "
          f"{runs[0]['arena_bytes']/max(1,runs[0]['peak_live_bytes']):.3f} |")
PYEOF

echo
echo "== the 8-rank default run (tessera launch --nproc 8), $STEPS steps, $PAIRS alternated pairs (tokens/s)"
for r in $(seq "$PAIRS"); do
  for g in false true; do
    "$BUILD/bin/tessera" launch --nproc 8 -- "$BUILD/bin/tessera" train configs/train/default.toml \
      --set train.steps="$STEPS" --set eval.every=0 --set train.graph=$g --set train.out_dir="$TMP/runs-$g-$r" >/dev/null 2>&1
    echo "$g $("$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" \
      "$TMP/runs-$g-$r/default/summary.json")" >>"$TMP/run.txt"
  done
done
"$PY" - "$TMP/run.txt" <<'PYEOF'
import statistics as st, sys
v = {"false": [], "true": []}
for line in open(sys.argv[1]):
    g, t = line.split()
    v[g].append(float(t))
ratios = [b / a for a, b in zip(v["false"], v["true"])]
print(f"| eager tok/s | graph tok/s | graph / eager (median of pairs) |")
print(f"|---|---|---|")
print(f"| {st.median(v['false']):.0f} | {st.median(v['true']):.0f} | {st.median(ratios):.3f}x |")
PYEOF

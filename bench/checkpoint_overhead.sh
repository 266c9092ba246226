#!/usr/bin/env bash
# Checkpoint overhead per step: the default model on one process, paired and
# interleaved rounds of (no checkpoints, checkpoints every K steps, the
# Young/Daly interval for an MTBF of M hours), each round STEPS steps.
# Prints each run's figures, then medians and the overhead: wall time with /
# without - 1 (wall time covers everything: the snapshots on the training
# path, the background writes competing for the cores, the wait for the
# last write; tokens/s does not count the time of the saves). Usage:
#   bench/checkpoint_overhead.sh [STEPS=60] [ROUNDS=3] [K=10] [M=1]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
ROUNDS=${2:-3}
K=${3:-10}
M=${4:-1}
BIN=build/bin/tessera
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
SINGLE=(--set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1
        --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=16 --set train.out_dir="\"$OUT\"")
run() {  # name, extra args...
  local name=$1
  shift
  rm -rf "$OUT/default"
  "$BIN" train configs/train/default.toml "${SINGLE[@]}" "$@" --plain > /dev/null
  python3 - "$OUT/default/summary.json" "$name" >> "$OUT/rows.txt" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("checkpoint", {})
print(sys.argv[2], s["tokens_per_s"], c.get("saves", 0), c.get("snapshot_s", 0), c.get("write_s", 0),
      c.get("interval_s", 0), s["wall_s"])
EOF
}
for r in $(seq "$ROUNDS"); do
  run none
  run every "--set" "checkpoint.every=$K"
  run mtbf "--set" "checkpoint.mtbf_hours=$M"
done
python3 - "$OUT/rows.txt" "$K" "$M" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("run     tokens/s  saves  stall_s  write_s  interval_s  wall_s")
for r in rows:
    print(f"{r[0]:<7} {float(r[1]):8.0f}  {int(r[2]):5d}  {float(r[3]):7.3f}  {float(r[4]):7.3f}  {float(r[5]):10.1f}  {float(r[6]):6.1f}")
# Paired: each round's runs against that round's run without checkpoints
# (the machine's speed drifts between rounds more than the effect).
rounds = [rows[i:i + 3] for i in range(0, len(rows), 3)]
over = {n: statistics.median(float(r[k][6]) / float(r[0][6]) - 1 for r in rounds) for k, n in ((1, "every"), (2, "mtbf"))}
stall = {n: statistics.median(float(r[3]) / float(r[6]) for r in rows if r[0] == n) for n in ("every", "mtbf")}
for n, label in (("every", f"every {sys.argv[2]} steps"), ("mtbf", f"Young/Daly, MTBF {sys.argv[3]} h")):
    print(f"{label}: overhead {100 * over[n]:+.2f} % of wall time (median of paired rounds), "
          f"stall on the training path {100 * stall[n]:.3f} %")
EOF

#!/usr/bin/env bash
# Checkpoint overhead per step: the default model, paired and interleaved
# rounds of (no checkpoints, checkpoints every K steps, the Young/Daly
# interval for an MTBF of M hours, the in-memory snapshot every step), each
# round STEPS steps; on one process, or with NPROC > 1 under `tessera launch`
# with the config's own mesh (8 ranks: dp 2 x tp 2 x pp 2, every rank saving
# its shard; the in-memory tier needs several ranks; and a run without the
# gradient replica checksums, to price them).
# Prints each run's figures, then medians and the overhead: wall time with /
# without - 1 (wall time covers everything: the snapshots on the training
# path, the background writes competing for the cores, the wait for the
# last write; tokens/s does not count the time of the saves). Usage:
#   [NPROC=1] bench/checkpoint_overhead.sh [STEPS=60] [ROUNDS=3] [K=10] [M=1]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-60}
ROUNDS=${2:-3}
K=${3:-10}
M=${4:-1}
BIN=build/bin/tessera
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
NPROC=${NPROC:-1}
COMMON=(--set train.steps="$STEPS" --set eval.every=0 --set eval.samples=16 --set train.out_dir="\"$OUT\""
        --set checkpoint.memory_dir="\"$OUT/mem\"")
if [ "$NPROC" -gt 1 ]; then
  LAUNCH=("$BIN" launch --nproc "$NPROC" --)
  SINGLE=("${COMMON[@]}")
else
  LAUNCH=()
  SINGLE=(--set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 "${COMMON[@]}")
fi
run() {  # name, extra args...
  local name=$1
  shift
  rm -rf "$OUT/default"
  "${LAUNCH[@]}" "$BIN" train configs/train/default.toml "${SINGLE[@]}" "$@" --plain > /dev/null
  python3 - "$OUT/default/summary.json" "$name" >> "$OUT/rows.txt" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("checkpoint", s.get("memory_snapshot", {}))
print(sys.argv[2], s["tokens_per_s"], c.get("saves", 0), c.get("snapshot_s", 0), c.get("write_s", 0),
      c.get("interval_s", 0), s["wall_s"])
EOF
}
for r in $(seq "$ROUNDS"); do
  run none
  run every "--set" "checkpoint.every=$K"
  run mtbf "--set" "checkpoint.mtbf_hours=$M"
  if [ "$NPROC" -gt 1 ]; then
    run memory "--set" "checkpoint.memory_every=1"
    run noguard "--set" "guard.replica_checksum=false"
  fi
done
python3 - "$OUT/rows.txt" "$K" "$M" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("run     tokens/s  saves  stall_s  write_s  interval_s  wall_s")
for r in rows:
    print(f"{r[0]:<7} {float(r[1]):8.0f}  {int(r[2]):5d}  {float(r[3]):7.3f}  {float(r[4]):7.3f}  {float(r[5]):10.1f}  {float(r[6]):6.1f}")
# Paired: each round's runs against that round's run without checkpoints
# (the machine's speed drifts between rounds more than the effect).
names = list(dict.fromkeys(r[0] for r in rows))
rounds = [rows[i:i + len(names)] for i in range(0, len(rows), len(names))]
over = {n: statistics.median(float(r[k][6]) / float(r[0][6]) - 1 for r in rounds) for k, n in enumerate(names) if k}
stall = {n: statistics.median(float(r[3]) / float(r[6]) for r in rows if r[0] == n) for n in names[1:]}
labels = {"every": f"every {sys.argv[2]} steps", "mtbf": f"Young/Daly, MTBF {sys.argv[3]} h",
          "memory": "in-memory snapshot every step"}
if "noguard" in names:  # the baseline runs verify gradients (the default); this is their cost
    k = names.index("noguard")
    guard = statistics.median(float(r[0][6]) / float(r[k][6]) - 1 for r in rounds)
    print(f"gradient verification with replica checksums (default, in every run above): {100 * guard:+.2f} % of wall "
          f"time against none (median of paired rounds)")
for n in names[1:]:
    if n == "noguard":
        continue
    label = labels[n]
    print(f"{label}: overhead {100 * over[n]:+.2f} % of wall time (median of paired rounds), "
          f"stall on the training path {100 * stall[n]:.3f} %")
EOF

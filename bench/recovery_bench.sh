#!/usr/bin/env bash
# Recovery time and steps lost per fault type: `tessera launch` (the agent)
# runs `tessera train` of the default model on 2 ranks (dp 2, ep 2, ZeRO-1)
# and a fault is injected into rank 1 (TESSERA_INJECT_* knobs). From the
# run's events.jsonl: detection = the agent's "failure" event after the
# fault ("fault_injected", logged by the failing rank just before it);
# recovery = the trainer's "recovered" event (written once the first
# training step after the restore has finished) after the fault, i.e. from
# failure to the next training step; steps lost = the last step finished
# before the failure minus the restored one. Every run must also end with
# exit 0. ROUNDS runs per fault; prints each run and the medians. Usage:
#   bench/recovery_bench.sh [ROUNDS=3] [STEPS=12]
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
STEPS=${2:-12}
BIN=build/bin/tessera
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MESH=(--set parallel.dp=2 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=2 --set parallel.zero=1
      --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=16 --set train.log_every=1)
run() {  # fault name, launch options (one string), train options (one string), env assignments...
  local name=$1 launch_opts=$2 train_opts=$3
  shift 3
  local dir="$OUT/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  env "$@" "$BIN" launch --nproc 2 --max-restarts 1 $launch_opts --events "$dir/runs/default/events.jsonl" -- \
    "$BIN" train configs/train/default.toml "${MESH[@]}" --set train.out_dir="\"$dir/runs\"" \
    --set checkpoint.dir="\"$dir/ckpt\"" --set checkpoint.memory_dir="\"$dir/mem\"" $train_opts --plain \
    > "$dir/log.txt" 2>&1 || { echo "$name: the job failed"; tail -20 "$dir/log.txt"; exit 1; }
  python3 - "$dir/runs/default/events.jsonl" "$name" >> "$OUT/rows.txt" <<'EOF'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
first = lambda kind: next((e for e in events if e["event"] == kind), None)
fault, failure, rec = first("fault_injected"), first("failure"), first("recovered")
t0 = fault["time"] if fault else failure["detected_at"]  # a kill in a save logs no fault event: detected at once
print(sys.argv[2], failure["detected_at"] - t0, rec["time"] - t0, rec["steps_lost"], rec["source"])
EOF
}
for r in $(seq "$ROUNDS"); do
  run sigkill_memory "--heartbeat-timeout 10" "--set checkpoint.memory_every=1" \
    TESSERA_INJECT_KILL_STEP=5 TESSERA_INJECT_RANK=1
  run sigkill_disk "--heartbeat-timeout 10" "--set checkpoint.every=4" \
    TESSERA_INJECT_KILL_STEP=6 TESSERA_INJECT_RANK=1
  run sigstop_memory "--heartbeat-timeout 2 --grace 1" "--set checkpoint.memory_every=1" \
    TESSERA_INJECT_STOP_STEP=5 TESSERA_INJECT_RANK=1
  run spare_memory "--heartbeat-timeout 10 --spares 1" "--set checkpoint.memory_every=1" \
    TESSERA_INJECT_KILL_STEP=5 TESSERA_INJECT_RANK=1
  run kill_in_save "--heartbeat-timeout 10" "--set checkpoint.every=4" \
    TESSERA_INJECT_KILL_IN_SAVE_STEP=8 TESSERA_INJECT_RANK=1
done
python3 - "$OUT/rows.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print("fault            detect_s  recover_s  steps_lost  restored_from")
for r in rows:
    print(f"{r[0]:<16} {float(r[1]):8.2f}  {float(r[2]):9.2f}  {int(r[3]):10d}  {r[4]}")
print("medians:")
for name in dict.fromkeys(r[0] for r in rows):
    sel = [r for r in rows if r[0] == name]
    print(f"{name:<16} {statistics.median(float(r[1]) for r in sel):8.2f}  "
          f"{statistics.median(float(r[2]) for r in sel):9.2f}  "
          f"{statistics.median(int(r[3]) for r in sel):10.0f}  {sel[0][4]}")
EOF

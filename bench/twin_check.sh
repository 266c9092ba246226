#!/usr/bin/env bash
# The twin check (docs/twin.md): runs short `tessera train` jobs of the
# default config on this machine and compares their median step time with
# what `tessera sim predict` says from the calibrated cluster spec.
#
#   bench/twin_check.sh [--calibrate] [--bin build/bin/tessera] [--steps 40] [--repeats 3]
#
# --calibrate first runs `tessera sim calibrate` (writes $CLUSTER and its
# .twin.toml; default configs/clusters/this-machine.toml). Measured = the
# median over repeats of each run's median step_s (metrics.jsonl, first 5
# steps skipped); the prediction never sees these runs. Exit status 1 when
# a configuration misses the 15 % target.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=build/bin/tessera
STEPS=40
REPEATS=3
CALIBRATE=0
CLUSTER=${CLUSTER:-configs/clusters/this-machine.toml}
CONFIG=configs/train/default.toml
while [[ $# -gt 0 ]]; do
  case "$1" in
    --calibrate) CALIBRATE=1; shift ;;
    --bin) BIN=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN=$(realpath "$BIN")
CONFIG_ABS=$(realpath "$CONFIG")
WORK=$(mktemp -d /tmp/twin_check.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# The machine is shared: wait (up to QUIET_WAIT s, default 60) until no
# other process is runnable (/proc/loadavg's running count is just the
# reader) for 1 s, so measurements see the machine itself.
wait_quiet() {
  local deadline=$((SECONDS + ${QUIET_WAIT:-60})) streak=0
  while ((SECONDS < deadline)); do
    local l1 l5 l15 runq rest
    read -r l1 l5 l15 runq rest </proc/loadavg  # a builtin: this shell is the only reader
    if ((${runq%%/*} <= 1)); then streak=$((streak + 1)); else streak=0; fi
    ((streak >= 4)) && return 0
    sleep 0.25
  done
  echo "# warning: the machine stayed busy: $(cat /proc/loadavg)" >&2
}

if [[ $CALIBRATE == 1 ]]; then
  wait_quiet
  echo "# $(uptime)"
  "$BIN" sim calibrate --out "$CLUSTER" --ranks 2 | tail -1
fi

# name | processes | overrides
CASES=(
  "single|1|parallel.dp=1 parallel.tp=1 parallel.pp=1 parallel.ep=1"
  "dp2|2|parallel.dp=2 parallel.tp=1 parallel.pp=1 parallel.ep=1"
  "dp2-ep2|2|parallel.dp=2 parallel.tp=1 parallel.pp=1 parallel.ep=2"
  "pp2|2|parallel.dp=1 parallel.tp=1 parallel.pp=2 parallel.ep=1"
)
COMMON="train.steps=$STEPS train.log_every=1000 eval.every=100000 eval.samples=64"

median_step() {  # metrics.jsonl -> median step_s after the first 5 steps
  python3 -c '
import json, statistics, sys
xs = [json.loads(l)["step_s"] for l in open(sys.argv[1]) if "\"step_s\"" in l]
print(statistics.median(xs[5:] if len(xs) > 10 else xs))' "$1"
}

status=0
printf "%-8s %6s %12s %12s %8s  %s\n" config ranks predicted_s measured_s error "runs (median step_s each)"
for c in "${CASES[@]}"; do
  IFS='|' read -r name nproc overrides <<<"$c"
  sets=()
  for kv in $overrides $COMMON; do sets+=(--set "$kv"); done
  pred=$("$BIN" sim predict --cluster "$CLUSTER" "$CONFIG" "${sets[@]}" --json |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])')
  runs=()
  for r in $(seq 1 "$REPEATS"); do
    dir="$WORK/$name-$r"
    mkdir -p "$dir"
    wait_quiet
    if [[ $nproc == 1 ]]; then
      (cd "$dir" && "$BIN" train "$CONFIG_ABS" "${sets[@]}" --set name=run >/dev/null 2>&1)
    else
      (cd "$dir" && "$BIN" launch --nproc "$nproc" -- "$BIN" train "$CONFIG_ABS" "${sets[@]}" \
        --set name=run >/dev/null 2>&1)
    fi
    runs+=("$(median_step "$dir/runs/run/metrics.jsonl")")
  done
  meas=$(printf "%s\n" "${runs[@]}" | python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.stdin))')
  err=$(python3 -c "print(f'{($pred - $meas) / $meas * 100:+.1f}%')")
  ok=$(python3 -c "print(abs($pred - $meas) / $meas <= 0.15)")
  [[ $ok == True ]] || status=1
  printf "%-8s %6s %12.4f %12.4f %8s  %s\n" "$name" "$nproc" "$pred" "$meas" "$err" "${runs[*]}"
done
echo "# $(uptime)"
exit $status

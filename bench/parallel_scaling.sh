#!/usr/bin/env bash
# Parallel training throughput on this machine: the default model with data
# parallelism on 1, 2, 4 and 8 ranks (global batch 32, one micro-batch per
# rank), then the default 8-rank mesh (dp 2 x tp 2 x pp 2, ep 2). Prints
# tokens/s, MFU (against the whole machine's measured peak), the fraction of
# step time blocked on communication, the part of it that is parameter
# synchronization, and the pipeline bubble; median of REPEATS runs each.
#   bench/parallel_scaling.sh [STEPS] [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-40}
REPEATS=${2:-3}
BIN=${BIN:-build/bin/tessera}
CONFIG=configs/train/default.toml
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

run() {  # name nproc overrides...
  local name=$1 nproc=$2
  shift 2
  for r in $(seq "$REPEATS"); do
    "$BIN" launch --nproc "$nproc" -- "$BIN" train "$CONFIG" --plain "$@" --set train.steps="$STEPS" \
      --set eval.every=0 --set eval.samples=8 --set train.out_dir="$TMP/runs" --set name="$name-$r" >/dev/null
  done
  /usr/bin/python3 - "$TMP/runs" "$name" "$REPEATS" <<'PYEOF'
import json, statistics, sys
root, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.load(open(f"{root}/{name}-{r}/summary.json")) for r in range(1, n + 1)]
med = lambda f: statistics.median(f(s) for s in rows)
p = lambda s, k: s.get("parallel", {}).get(k, 0.0)
print(f"{name:>22}  {med(lambda s: s['tokens_per_s']):8.0f} tok/s  MFU {100 * med(lambda s: s['mfu']):5.1f}%  "
      f"comm {100 * med(lambda s: p(s, 'comm_fraction')):5.1f}%  param sync {100 * med(lambda s: p(s, 'param_sync_fraction')):5.1f}%  "
      f"bubble {100 * med(lambda s: p(s, 'bubble_fraction')):5.1f}%")
PYEOF
}

DPONLY="--set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 --set parallel.zero=0"
# shellcheck disable=SC2086
{
  run "1 rank" 1 $DPONLY --set parallel.dp=1 --set train.micro_batch=32
  run "dp 2" 2 $DPONLY --set parallel.dp=2 --set train.micro_batch=16
  run "dp 4" 4 $DPONLY --set parallel.dp=4 --set train.micro_batch=8
  run "dp 8" 8 $DPONLY --set parallel.dp=8 --set train.micro_batch=4
  run "dp2 tp2 pp2 ep2 (default)" 8
}

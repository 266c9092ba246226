#!/usr/bin/env bash
# Data-parallel training throughput: Tessera on 2 ranks (parallel.dp = 2,
# `tessera launch`) vs PyTorch 1.13 DistributedDataParallel over Gloo on 2
# processes (torchrun-style environment), same model, same global batches, one thread per
# rank, in one run.
#   bench/compare_torch_ddp.sh [CONFIG] [STEPS] [REPEATS]
# Prints each repeat and the median tokens/s of both and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/train/default.toml}
STEPS=${2:-40}
REPEATS=${3:-3}
BIN=${BIN:-build/bin/tessera}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# Data parallelism only, 2 ranks, each rank half of the global batch in one micro-batch.
DP="--set parallel.dp=2 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 --set parallel.zero=0"
GLOBAL=$("$PY" -c "import tomllib,sys;print(tomllib.load(open(sys.argv[1],'rb'))['train']['global_batch'])" "$CONFIG")

json() { "$PY" -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

tessera_tps() {
  # shellcheck disable=SC2086
  "$BIN" launch --nproc 2 -- "$BIN" train "$CONFIG" --plain $DP --set train.micro_batch=$((GLOBAL / 2)) \
    --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 --set train.threads=1 \
    --set train.out_dir="$TMP/runs" --set name=ddp >/dev/null
  json "$TMP/runs/ddp/summary.json" tokens_per_s
}

torch_tps() {
  # Two processes with torchrun's environment (Debian's torchrun 1.13 fails
  # in its output redirection, so they are started here); rank 0 prints.
  local port
  port=$("$PY" -c "import socket;s=socket.socket();s.bind(('127.0.0.1',0));print(s.getsockname()[1])")
  for r in 1 0; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 RANK=$r LOCAL_RANK=$r \
      WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      "$PY" bench/torch_gpt.py "$CONFIG" "$TMP/batches.bin" --steps $((STEPS - 3)) --warmup 3 --threads 1 \
      > "$TMP/torch.$r.json" &
  done
  wait
  json "$TMP/torch.0.json" tokens_per_s
}

"$BIN" data export "$CONFIG" --steps "$STEPS" --out "$TMP/batches.bin" >/dev/null
ts=()
ps=()
for r in $(seq "$REPEATS"); do
  t=$(tessera_tps); p=$(torch_tps)
  printf "repeat %d: tessera dp=2 %.0f tok/s  pytorch DDP/gloo %.0f tok/s  ratio %.2f\n" "$r" "$t" "$p" \
    "$("$PY" -c "print($t / $p)")"
  ts+=("$t")
  ps+=("$p")
done
"$PY" bench/median_ratio.py "tessera dp=2" "pytorch DDP" "${ts[@]}" -- "${ps[@]}"

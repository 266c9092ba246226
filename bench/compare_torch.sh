#!/usr/bin/env bash
# Training throughput: Tessera vs PyTorch (Debian python3-torch, 1.13) on the
# same model, the same batches, in one run.
#   bench/compare_torch.sh [CONFIG] [STEPS] [REPEATS]
# Each repeat runs both frameworks with 1 and with 2 threads and keeps each
# framework's faster setting (small models often train faster on one
# thread); the result is the median over repeats of those best figures and
# their ratio. Run on an idle machine; figures go to docs/perf.md.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/train/default.toml}
STEPS=${2:-40}
REPEATS=${3:-3}
BIN=${BIN:-build/bin/tessera}
# The default config is laid out for 8 ranks: this compares one process
# (MICRO_BATCH= keeps the config's own micro-batch, as the dense-GPT configs want).
MICRO_BATCH=${MICRO_BATCH-32}
SINGLE="--set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 --set parallel.zero=0"
if [ -n "$MICRO_BATCH" ]; then SINGLE="$SINGLE --set train.micro_batch=$MICRO_BATCH"; fi
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

json() { "$PY" -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

tessera_tps() {  # threads
  # shellcheck disable=SC2086
  "$BIN" train "$CONFIG" --plain $SINGLE --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 \
    --set train.threads="$1" --set train.out_dir="$TMP/runs" --set name=bench >/dev/null
  json "$TMP/runs/bench/summary.json" tokens_per_s
}

torch_tps() {  # threads
  # PyTorch at its best here: OpenBLAS (libopenblas0-pthread provides the libblas.so.3 Debian's torch
  # calls) without the environment's OPENBLAS_CORETYPE/L2_SIZE overrides (they halve it), and the
  # same OpenMP wait policy as Tessera (the libgomp default for a single process).
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$1" \
    OPENBLAS_NUM_THREADS="$1" "$PY" bench/torch_gpt.py "$CONFIG" "$TMP/batches.bin" --steps $((STEPS - 3)) \
    --warmup 3 --threads "$1" > "$TMP/torch.json"
  json "$TMP/torch.json" tokens_per_s
}

"$BIN" data export "$CONFIG" --steps "$STEPS" --out "$TMP/batches.bin" >/dev/null
best_t=()
best_p=()
for r in $(seq "$REPEATS"); do
  t1=$(tessera_tps 1); t2=$(tessera_tps 2); p1=$(torch_tps 1); p2=$(torch_tps 2)
  bt=$("$PY" -c "print(max($t1, $t2))"); bp=$("$PY" -c "print(max($p1, $p2))")
  printf "repeat %d: tessera %.0f / %.0f tok/s (1 / 2 threads)  pytorch %.0f / %.0f tok/s  best ratio %.2f\n" \
    "$r" "$t1" "$t2" "$p1" "$p2" "$("$PY" -c "print($bt / $bp)")"
  best_t+=("$bt")
  best_p+=("$bp")
done
"$PY" bench/median_ratio.py "tessera (best of 1/2 threads)" "pytorch (best)" "${best_t[@]}" -- "${best_p[@]}"

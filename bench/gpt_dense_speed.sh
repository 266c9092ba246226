#!/usr/bin/env bash
# Training speed as a new user sees it (issue 16): dense GPTs (d_model 256 /
# 512 / 1024, 4 layers, sequence 128, micro-batch 16, layernorm, GELU,
# biases; bench/configs/gpt_dense_d*.toml) — Tessera fp32 with 1 and 2
# threads, Tessera bf16 with 2 threads, and PyTorch 1.13 fp32 (bench/torch_gpt.py,
# OpenBLAS without the environment's OPENBLAS_CORETYPE) with 1 and 2 threads,
# interleaved, on the same batches. Prints one line per (config, repeat) and
# the medians: MFU, Tessera / PyTorch at one thread and at each one's best
# thread count, bf16 / fp32. The fp32 peak (the MFU denominator) is measured
# again before each repeat.
#   bench/gpt_dense_speed.sh [REPEATS] [STEPS] [D ...]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
STEPS=${2:-12}
shift 2 2>/dev/null || shift $#
DIMS=${*:-"256 512 1024"}
BIN=${BIN:-build/bin/tessera}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
field() { "$PY" -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

tessera() {  # config threads precision -> "tokens/s mfu"
  OMP_NUM_THREADS=$2 "$BIN" train "$1" --plain --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 \
    --set train.threads="$2" --set train.precision=\""$3"\" --set train.out_dir=\""$TMP/runs"\" --set name=\"bench\" >/dev/null
  echo "$(field "$TMP/runs/bench/summary.json" tokens_per_s) $(field "$TMP/runs/bench/summary.json" mfu)"
}
torch() {  # config threads -> tokens/s
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$2" OPENBLAS_NUM_THREADS="$2" \
    "$PY" bench/torch_gpt.py "$1" "$TMP/batches.bin" --steps $((STEPS - 3)) --warmup 3 --threads "$2" >"$TMP/t.json"
  field "$TMP/t.json" tokens_per_s
}

for d in $DIMS; do
  cfg=bench/configs/gpt_dense_d$d.toml
  "$BIN" data export "$cfg" --steps "$STEPS" --out "$TMP/batches.bin" >/dev/null
  rows=()
  for r in $(seq "$REPEATS"); do
    # MFU against the peak measured now (the machine drifts by 10-30 % within
    # minutes); a measurement disturbed by a process still exiting is not
    # cached by tessera: wait and measure again.
    for try in 1 2 3; do
      sleep 2
      peak=$("$BIN" info --remeasure 2>/dev/null | grep -E '^  fp32|DISTURBED' || true)
      grep -q DISTURBED <<<"$peak" || break
    done
    echo "d$d repeat $r peak (try $try): $(head -1 <<<"$peak" | sed 's/^ *//')"
    read -r f1 m1 < <(tessera "$cfg" 1 fp32)
    read -r f2 m2 < <(tessera "$cfg" 2 fp32)
    read -r b2 _ < <(tessera "$cfg" 2 bf16)
    p1=$(torch "$cfg" 1); p2=$(torch "$cfg" 2)
    row=$("$PY" -c "
f1,f2,b2,p1,p2,m1,m2=$f1,$f2,$b2,$p1,$p2,$m1,$m2
print(f'{f1:.0f} {f2:.0f} {b2:.0f} {p1:.0f} {p2:.0f} {100*m1:.1f} {100*m2:.1f} {f1/p1:.2f} {max(f1,f2)/max(p1,p2):.2f} {b2/f2:.2f}')")
    echo "d$d repeat $r: tessera fp32 1t/2t, bf16 2t, torch 1t/2t (tok/s); MFU 1t/2t %; x torch 1t, x torch best, bf16/fp32: $row"
    rows+=("$row")
  done
  printf '%s\n' "${rows[@]}" | "$PY" -c "
import sys,statistics as st
rows=[list(map(float,l.split())) for l in sys.stdin if l.strip()]
med=[st.median(c) for c in zip(*rows)]
print('d$d median: tessera fp32 %.0f / %.0f tok/s (1/2 threads), bf16 %.0f; torch %.0f / %.0f; MFU %.1f%% / %.1f%%; x torch 1t %.2f, x torch best %.2f, bf16/fp32 %.2f' % tuple(med))"
done

#!/usr/bin/env bash
# Training throughput: Tessera vs PyTorch (Debian python3-torch, 1.13) on the
# same model, the same batches and the same thread count, in one run.
#   bench/compare_torch.sh [CONFIG] [STEPS] [REPEATS]
# Prints per-repeat tokens/s of both and the median ratio; run on an idle
# machine (the figures go to docs/perf.md).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${1:-configs/train/default.toml}
STEPS=${2:-40}
REPEATS=${3:-3}
THREADS=${THREADS:-$(nproc)}
BIN=${BIN:-build/bin/tessera}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$BIN" data export "$CONFIG" --steps "$STEPS" --out "$TMP/batches.bin" >/dev/null
tess=()
torch=()
for r in $(seq "$REPEATS"); do
  "$BIN" train "$CONFIG" --plain --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 \
    --set train.threads="$THREADS" --set train.out_dir="$TMP/runs" --set name=bench >/dev/null
  t=$("$PY" -c "import json;print(json.load(open('$TMP/runs/bench/summary.json'))['tokens_per_s'])")
  mfu=$("$PY" -c "import json;print(json.load(open('$TMP/runs/bench/summary.json'))['mfu'])")
  # PyTorch at its best here: OpenBLAS (libopenblas0-pthread provides libblas.so.3, which Debian's
  # torch calls) with the environment's OPENBLAS_CORETYPE/L2_SIZE overrides removed (they halve it),
  # and the same OpenMP wait policy as Tessera.
  p=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$THREADS "$PY" bench/torch_gpt.py "$CONFIG" "$TMP/batches.bin" --steps $((STEPS - 3)) \
      --warmup 3 --threads "$THREADS" | "$PY" -c "import json,sys;print(json.load(sys.stdin)['tokens_per_s'])")
  printf "repeat %d: tessera %.0f tok/s (MFU %.1f%%)  pytorch %.0f tok/s  ratio %.2f\n" "$r" "$t" \
    "$("$PY" -c "print($mfu*100)")" "$p" "$("$PY" -c "print($t/$p)")"
  tess+=("$t")
  torch+=("$p")
done
"$PY" - "${tess[@]}" -- "${torch[@]}" <<'PYEOF'
import statistics, sys
args = sys.argv[1:]
i = args.index("--")
t = [float(x) for x in args[:i]]
p = [float(x) for x in args[i + 1:]]
print(f"median: tessera {statistics.median(t):.0f} tok/s, pytorch {statistics.median(p):.0f} tok/s, "
      f"ratio {statistics.median(t) / statistics.median(p):.2f}x")
PYEOF

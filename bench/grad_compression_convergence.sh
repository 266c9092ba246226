#!/usr/bin/env bash
# Convergence with compressed gradients: trains configs/train/default.toml
# on 2 data-parallel ranks (`tessera launch --nproc 2`, mesh dp=2 tp=1 pp=1
# ep=1: every gradient goes through the data-parallel reduction), once
# uncompressed and once per codec in CODECS (default int8 and topk:0.01),
# same seed, and prints each run's held-out metrics from its summary.json
# (eval loss, exact match) and the relative difference to the uncompressed
# run, plus the gradient bytes sent. Goal (issue 14): int8 within 2 % of
# the uncompressed held-out metric.
#   bench/grad_compression_convergence.sh [STEPS=2000]   (BIN=build/bin/tessera; CODECS="int8 topk:0.01";
#     EXTRA="--set train.seed=2" adds overrides to every run; OUT=folder for the runs)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-2000}
BIN=${BIN:-build/bin/tessera}
CODECS=${CODECS:-"int8 topk:0.01"}
EXTRA=${EXTRA:-}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "runs in $OUT"
for c in none $CODECS; do
  name="gc-${c//[:.]/_}"
  "$BIN" launch --nproc 2 -- "$BIN" train configs/train/default.toml \
    --set parallel.dp=2 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 \
    --set train.steps="$STEPS" --set parallel.grad_compression="\"$c\"" \
    --set name="\"$name\"" --set train.out_dir="\"$OUT\"" $EXTRA > "$OUT/$name.log" 2>&1 \
    || { tail -20 "$OUT/$name.log"; exit 1; }
  grep -h "done:\|gradient reductions" "$OUT/$name.log" | sed 's/^/  /'
done
python3 - "$OUT" $CODECS <<'PY'
import glob, json, os, sys
out, codecs = sys.argv[1], sys.argv[2:]
def load(c):
    name = "gc-" + c.replace(":", "_").replace(".", "_")
    f = sorted(glob.glob(os.path.join(out, name, "**", "summary.json"), recursive=True) +
               glob.glob(os.path.join(out, name, "summary.json")), key=os.path.getmtime)
    return json.load(open(f[-1]))
base = load("none")
print("| gradients | eval loss | exact match | rel. diff (exact match) | rel. diff (eval loss) | grad bytes sent | vs fp32 |")
print("|---|---|---|---|---|---|---|")
for c in ["none"] + codecs:
    s = load(c); p = s["parallel"]
    dm = (s["eval_metric"] - base["eval_metric"]) / base["eval_metric"] if base["eval_metric"] else float("nan")
    dl = (s["eval_loss"] - base["eval_loss"]) / base["eval_loss"]
    print(f"| {c} | {s['eval_loss']:.4f} | {s['eval_metric']:.4f} | {100*dm:+.2f} % | {100*dl:+.2f} % | "
          f"{p['grad_bytes_sent']/2**20:.1f} MiB | {p['grad_bytes_ratio']:.3f} |")
PY

#!/usr/bin/env bash
# Peak memory, bf16 vs fp32 compute (fp32 master weights, gradients and AdamW
# state in both): the table "Memory, bf16 vs fp32" of docs/perf.md. The
# default model on one process at micro-batch 32 and 64 (global batch = micro-batch), and data-parallel on
# 2 ranks (ZeRO-1 from the config, ep 1, micro-batch 16 per rank). Figures are
# the allocator's high-water mark (summary.json's peak_memory_bytes; per rank:
# parallel.ranks[].peak_memory_bytes and activations_and_buffers_bytes, the
# peak minus parameters, gradients and optimizer state). For one process the
# "activations" ratio is the peak minus 16 bytes per parameter (fp32 master
# weights, gradients and the two AdamW moments). Memory does not depend on
# the machine's speed: a few steps suffice.
#   bench/memory_precision.sh [STEPS=20]            (BIN=build/bin/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-20}
BIN=${BIN:-build/bin/tessera}
CONFIG=configs/train/default.toml
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
COMMON=(--plain --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 --set train.out_dir="\"$TMP\"")
ONE=(--set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1)
DP2=(--set parallel.dp=2 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 --set train.micro_batch=16)

for p in fp32 bf16; do
  "$BIN" train "$CONFIG" "${COMMON[@]}" "${ONE[@]}" --set train.micro_batch=32 --set train.precision="\"$p\"" \
    --set name="\"one32-$p\"" >/dev/null
  "$BIN" train "$CONFIG" "${COMMON[@]}" "${ONE[@]}" --set train.micro_batch=64 --set train.global_batch=64 --set train.precision="\"$p\"" \
    --set name="\"one64-$p\"" >/dev/null
  "$BIN" launch --nproc 2 -- "$BIN" train "$CONFIG" "${COMMON[@]}" "${DP2[@]}" --set train.precision="\"$p\"" \
    --set name="\"dp2-$p\"" >/dev/null
done

python3 - "$TMP" <<'EOF'
import json, sys
root = sys.argv[1]
MiB = 1048576.0
s = {n: json.load(open(f"{root}/{n}/summary.json")) for n in
     [f"{r}-{p}" for r in ("one32", "one64", "dp2") for p in ("fp32", "bf16")]}
def ranks(n, key):  # the largest rank's figure
    return max(r[key] for r in s[n]["parallel"]["ranks"])
rows = [("1 process, micro-batch 32", [s[f"one32-{p}"]["peak_memory_bytes"] for p in ("fp32", "bf16")]),
        ("1 process, micro-batch 64", [s[f"one64-{p}"]["peak_memory_bytes"] for p in ("fp32", "bf16")]),
        ("dp 2 (ZeRO-1), micro-batch 16, per rank", [ranks(f"dp2-{p}", "peak_memory_bytes") for p in ("fp32", "bf16")]),
        ("activations + buffers only, dp 2", [ranks(f"dp2-{p}", "activations_and_buffers_bytes") for p in ("fp32", "bf16")])]
print("| run | fp32 | bf16 | ratio |")
print("|---|---:|---:|---:|")
for name, (a, b) in rows:
    print(f"| {name} | {a / MiB:.1f} MiB | {b / MiB:.1f} MiB | {b / a:.2f} |")
state = 16 * s["one32-fp32"]["parameters"]
for mb in ("32", "64"):
    a, b = (s[f"one{mb}-{p}"]["peak_memory_bytes"] - state for p in ("fp32", "bf16"))
    print(f"1 process, micro-batch {mb}, peak - 16 B x {s['one32-fp32']['parameters']} parameters "
          f"({state / MiB:.1f} MiB): fp32 {a / MiB:.1f} MiB, bf16 {b / MiB:.1f} MiB, ratio {b / a:.2f}")
EOF

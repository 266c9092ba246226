#!/usr/bin/env bash
# MoE dispatch/combine figures for docs/perf.md ("MoE dispatch and combine"):
# normal mode at EP 4 and 8 against a plain all-to-all-v of the same bytes
# (plain and shared buffers), and low-latency dispatch of 128 tokens x 7168
# bf16, top-8, at EP 8 against 2 x the 8-byte all-reduce latency + the copy
# time. Each line is one run's JSON (medians of ITERS iterations, interleaved);
# ROUNDS rounds (default 5: the machine drifts, so quote the median round).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
ROUNDS=${ROUNDS:-5}
ITERS=${ITERS:-21}
for round in $(seq "$ROUNDS"); do
  for np in 4 8; do
    "$BIN/tessera" launch --nproc "$np" -- "$BIN/moe_perf" --tokens 512 --hidden 1024 --iters "$ITERS" | sed 's/^\[rank 0\] //'
  done
  "$BIN/tessera" launch --nproc 8 -- "$BIN/moe_perf" --ll --tokens 128 --hidden 7168 --top-k 8 \
    --experts-per-rank 4 --payload bf16 --iters "$ITERS" | sed 's/^\[rank 0\] //'
done

#!/usr/bin/env bash
# The torch.distributed backend "tessera" against "gloo" and against
# Tessera's own `tessera ccl-perf`, in one run (docs/pytorch.md, docs/perf.md):
#   1. all_reduce of 64 MiB fp32 (and 8 bytes) from Python, tessera vs gloo in
#      the same processes (bench/torch_backend.py), at 2 / 4 / 8 processes;
#      `tessera ccl-perf allreduce` (private buffers, blocking calls) at the
#      same sizes right after; both time a loop of calls per rank and take
#      the slowest rank's mean per call (ccl-perf -a 3); the Python side once
#      more with THP_MEM_ALLOC_ENABLE=1 (large tensors on huge pages, as
#      ccl-perf's buffers are);
#   2. DDP training throughput of PyTorch's GPT (bench/torch_gpt.py, the
#      default config, one thread per rank) with --backend tessera vs gloo,
#      at 2 and 4 processes.
# Each cell runs REPEATS times, interleaved; medians are printed.
#   bench/torch_backend.sh [REPEATS] [RANKS] [DDP_RANKS] [DDP_STEPS]
# Run it on an idle machine (this host's speed drifts from minute to minute).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
RANKS=${2:-"2 4 8"}
DDP_RANKS=${3:-"2 4"}
DDP_STEPS=${4:-20}
BIN=${BIN:-build/bin/tessera}
PY=/usr/bin/python3
CONFIG=${CONFIG:-configs/train/default.toml}
export PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ccl-perf's out-of-place time (µs) of its one size row.
ccl_us() {
  "$BIN" launch --nproc "$1" -- "$BIN" ccl-perf allreduce -b "$2" -e "$2" -n "$3" -w "$4" -a 3 "${@:5}" 2>/dev/null |
    sed 's/^\[rank 0\] //' | awk '$1 ~ /^[0-9]+$/ && NF >= 8 {print $6; exit}'
}

echo "== all_reduce fp32 sum: torch.distributed tessera vs gloo vs tessera ccl-perf (µs per call) =="
for n in $RANKS; do
  for r in $(seq "$REPEATS"); do
    "$BIN" launch --nproc "$n" -- "$PY" bench/torch_backend.py --sizes 8,67108864 --iters 5000,10 --warmup 500,3 \
      2>/dev/null | sed 's/^\[rank 0\] //' | grep '^{' > "$TMP/py.$n.$r.json"
    # The same with PyTorch's huge-page switch (THP_MEM_ALLOC_ENABLE=1, emulated for 1.13 by tessera.torch):
    # large tensors 2 MiB aligned and advised for THP, as ccl-perf's buffers are.
    THP_MEM_ALLOC_ENABLE=1 "$BIN" launch --nproc "$n" -- "$PY" bench/torch_backend.py --sizes 8,67108864 \
      --iters 5000,10 --warmup 500,3 2>/dev/null | sed 's/^\[rank 0\] //' | grep '^{' > "$TMP/pythp.$n.$r.json"
    echo "$(ccl_us "$n" 8 5000 500) $(ccl_us "$n" 64M 10 3) $(ccl_us "$n" 64M 10 3 -R 1)" > "$TMP/ccl.$n.$r.txt"
  done
done
"$PY" - "$TMP" "$REPEATS" $RANKS <<'PYEOF'
import json, statistics, sys
tmp, repeats, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
print(f"{'ranks':>5} {'size':>8} {'tessera':>10} {'THP':>10} {'shared':>10} {'gloo':>10} {'ccl-perf':>10} "
      f"{'ccl -R 1':>10} {'x gloo':>7} {'/ ccl':>6} {'THP / ccl':>9} {'shared/ccl -R 1':>15}")
for n in ranks:
    for k, size in enumerate(["8 B", "64 MiB"]):
        t, th, s, g, c, cr = [], [], [], [], [], []
        for r in range(1, repeats + 1):
            row = json.load(open(f"{tmp}/py.{n}.{r}.json"))["rows"][k]
            t.append(row["tessera_us"]); s.append(row["tessera_shared_us"]); g.append(row["gloo_us"])
            th.append(json.load(open(f"{tmp}/pythp.{n}.{r}.json"))["rows"][k]["tessera_us"])
            ccl = open(f"{tmp}/ccl.{n}.{r}.txt").read().split()
            c.append(float(ccl[k])); cr.append(float(ccl[2]))
        mt, mth, ms, mg, mc, mcr = med(t), med(th), med(s), med(g), med(c), med(cr)
        shared_ratio = f"{mcr / ms:>15.2f}" if k == 1 else f"{'':>15}"
        mcr_text = f"{mcr:>10.0f}" if k == 1 else f"{'':>10}"
        print(f"{n:>5} {size:>8} {mt:>10.1f} {mth:>10.1f} {ms:>10.1f} {mg:>10.1f} {mc:>10.2f} {mcr_text} "
              f"{mg / mt:>7.2f} {mc / mt:>6.2f} {mc / mth:>9.2f} {shared_ratio}")
print("THP: tessera with THP_MEM_ALLOC_ENABLE=1 (large tensors on huge pages, like ccl-perf's buffers).")
print("tessera / shared: torch.distributed with ordinary / tessera.torch.empty_shared tensors; ccl-perf: private "
      "buffers, -R 1: AllocShared buffers. x gloo = gloo / tessera time (goal at 64 MiB >= 3); / ccl = ccl-perf / "
      "tessera time (goal at 64 MiB >= 0.8; at 8 B the goal, tessera <= 2x ccl-perf, is >= 0.5)")
PYEOF

echo "== DDP training throughput, bench/torch_gpt.py ($CONFIG, $DDP_STEPS steps, 1 thread per rank) =="
"$BIN" data export "$CONFIG" --steps "$DDP_STEPS" --out "$TMP/batches.bin" >/dev/null
for n in $DDP_RANKS; do
  ts=(); gs=()
  for r in $(seq "$REPEATS"); do
    for b in tessera gloo; do
      "$BIN" launch --nproc "$n" -- "$PY" bench/torch_gpt.py "$CONFIG" "$TMP/batches.bin" --steps $((DDP_STEPS - 3)) \
        --warmup 3 --threads 1 --backend "$b" 2>/dev/null | sed 's/^\[rank 0\] //' | grep '^{' > "$TMP/ddp.$b.json"
      v=$("$PY" -c "import json,sys;print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$TMP/ddp.$b.json")
      if [ "$b" = tessera ]; then ts+=("$v"); else gs+=("$v"); fi
    done
    printf "%d ranks, repeat %d: tessera %.0f tok/s, gloo %.0f tok/s\n" "$n" "$r" "${ts[-1]}" "${gs[-1]}"
  done
  printf "%d ranks " "$n"
  "$PY" bench/median_ratio.py "DDP/tessera" "DDP/gloo" "${ts[@]}" -- "${gs[@]}"
done

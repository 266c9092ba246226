#!/usr/bin/env bash
# Cost of the tcp transport's frame checksums (on by default): all-reduce
# 1 MiB - 64 MiB with `tessera ccl-perf` over TESSERA_TRANSPORT=tcp at 2 and
# 4 local ranks, checksums on (TESSERA_TCP_CHECKSUM=1) vs off (=0), in paired
# rounds whose order alternates (this machine's speed drifts 10-30 % within
# minutes, so only ratios within a round are compared). Prints the median
# over rounds of time(on) / time(off) per size and rank count, and the
# median times. With BASE_BIN=path/to/other/tessera a third arm runs that
# binary (e.g. a build from before a change; its own default checksum
# setting) and its ratio to "off" is printed too. Usage:
#   bench/tcp_checksum_overhead.sh [ROUNDS=5] [ITERS=10]     (BIN=build/bin/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
ITERS=${2:-10}
BIN=${BIN:-build/bin/tessera}
BASE_BIN=${BASE_BIN:-}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

run() {  # arm nproc round binary checksum
  local arm=$1 np=$2 round=$3 bin=$4 sum=$5
  local env=(env TESSERA_TRANSPORT=tcp)
  [ -n "$sum" ] && env+=(TESSERA_TCP_CHECKSUM="$sum")
  "${env[@]}" "$bin" launch --nproc "$np" -- "$bin" ccl-perf allreduce -b 1M -e 64M -f 4 -n "$ITERS" -w 3 \
    | awk -v arm="$arm" -v np="$np" -v round="$round" \
        '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ { print arm, np, round, $3, $8 }' >> "$OUT/rows.txt"
}

for round in $(seq 1 "$ROUNDS"); do
  for np in 2 4; do
    arms=(on off)
    [ -n "$BASE_BIN" ] && arms+=(base)
    if (( round % 2 == 0 )); then arms=($(printf '%s\n' "${arms[@]}" | tac)); fi
    for arm in "${arms[@]}"; do
      case $arm in
        on) run on "$np" "$round" "$BIN" 1 ;;
        off) run off "$np" "$round" "$BIN" 0 ;;
        base) run base "$np" "$round" "$BASE_BIN" "" ;;
      esac
    done
  done
done

python3 - "$OUT/rows.txt" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(dict)  # (np, size) -> {(arm, round): us}
for line in open(sys.argv[1]):
    arm, np, rnd, size, us = line.split()
    t[(int(np), int(size))][(arm, int(rnd))] = float(us)
arms = sorted({a for v in t.values() for a, _ in v})
print("| ranks | size | off (us) | on (us) | on/off (median of paired ratios) |"
      + (" base/off |" if "base" in arms else ""))
print("|---|---|---|---|---|" + ("---|" if "base" in arms else ""))
for (np, size), v in sorted(t.items()):
    rounds = sorted({r for _, r in v})
    def med(arm):
        return statistics.median(v[(arm, r)] for r in rounds if (arm, r) in v)
    def ratio(arm):
        rs = [v[(arm, r)] / v[("off", r)] for r in rounds if (arm, r) in v and ("off", r) in v]
        return statistics.median(rs), min(rs), max(rs)
    m, lo, hi = ratio("on")
    row = f"| {np} | {size >> 20} MiB | {med('off'):.0f} | {med('on'):.0f} | {m:.3f} ({lo:.2f}-{hi:.2f}) |"
    if "base" in arms:
        b, blo, bhi = ratio("base")
        row += f" {b:.3f} ({blo:.2f}-{bhi:.2f}) |"
    print(row)
print(f"({len(rounds)} paired rounds, {sys.argv[1].split('/')[-2]}; times: out-of-place, rank 0)")
PY

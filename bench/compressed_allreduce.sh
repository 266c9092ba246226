#!/usr/bin/env bash
# Compressed vs fp32 all-reduce between two "hosts" on a 1 Gbit/s link:
# two network namespaces joined by a veth pair, both directions shaped with
# `tc qdisc ... tbf rate 1gbit` (netem is not available on this kernel, so
# no added delay: the link is bandwidth-limited only, ~0.05 ms RTT). One
# rank per namespace (`tessera launch --nnodes 2`, tcp transport), each arm
# `tessera ccl-perf allreduce` of 64 MiB fp32 (logical), uncompressed, int8
# and topk:0.01, repeated REPEATS times in alternating order; prints the
# median time per arm and the speed-up over fp32. Needs root.
#   bench/compressed_allreduce.sh [REPEATS=3] [ITERS=5]     (BIN=build/bin/tessera)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
ITERS=${2:-5}
BIN=$(realpath "${BIN:-build/bin/tessera}")
SIZE=${SIZE:-64M}
ARMS=${ARMS:-"fp32 int8 topk:0.01"}
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for ip netns / tc" >&2; exit 0; fi
. bench/netns_link.sh
ADDR_A=10.214.0.1 ADDR_B=10.214.0.2
OUT=$(mktemp -d)
cleanup() { netns_link_down; rm -rf "$OUT"; }
trap cleanup EXIT
# The figures in docs/perf.md were taken with this burst / latency.
BURST=${BURST_CQ:-64kb} LATENCY=${LATENCY_CQ:-50ms} netns_link_up cq$$ "$ADDR_A" "$ADDR_B"
NSA=$NS_A NSB=$NS_B
echo "# link: $LINK_SHAPE"
export TESSERA_JOB_TOKEN=compressed-allreduce-bench-$$-0123456789

run() {  # arm repeat port
  local arm=$1 rep=$2 port=$3 extra=()
  [ "$arm" != fp32 ] && extra=(--compress "$arm")
  local cmd=(-- "$BIN" ccl-perf allreduce -b "$SIZE" -e "$SIZE" -n "$ITERS" -w 2 -c 0 --transport tcp "${extra[@]}")
  timeout 300 ip netns exec "$NSB" "$BIN" launch --nproc 1 --nnodes 2 --node-rank 1 --master $ADDR_A:$port \
    --connect-timeout 60 "${cmd[@]}" > "$OUT/b.txt" 2>&1 &
  local pb=$!
  timeout 300 ip netns exec "$NSA" "$BIN" launch --nproc 1 --nnodes 2 --node-rank 0 --master $ADDR_A:$port \
    --connect-timeout 60 "${cmd[@]}" > "$OUT/a.txt" 2>&1 || { cat "$OUT/a.txt" "$OUT/b.txt" >&2; exit 1; }
  wait $pb || { cat "$OUT/b.txt" >&2; exit 1; }
  # fp32 rows: size count type redop root time(us) ...; compressed rows: size count time(us) ...
  awk -v arm="$arm" -v rep="$rep" '$1 == "[rank" && $2 == "0]" && $3 ~ /^[0-9]+$/ {
      t = (arm == "fp32") ? $8 : $5; sent = (arm == "fp32") ? "-" : $8; print arm, rep, t, sent }' \
    "$OUT/a.txt" >> "$OUT/rows.txt"
  grep -q . "$OUT/rows.txt" || { cat "$OUT/a.txt" >&2; exit 1; }
}

port=29600
for rep in $(seq 1 "$REPEATS"); do
  arms=($ARMS)
  if (( rep % 2 == 0 )); then arms=($(printf '%s\n' "${arms[@]}" | tac)); fi
  for arm in "${arms[@]}"; do
    port=$((port + 1))
    run "$arm" "$rep" "$port"
  done
done

python3 - "$OUT/rows.txt" "$SIZE" <<'PY'
import collections, statistics, sys
t = collections.defaultdict(list); sent = {}
for line in open(sys.argv[1]):
    arm, rep, us, s = line.split()
    t[arm].append(float(us))
    if s != "-": sent[arm] = float(s)
base = statistics.median(t["fp32"]) if "fp32" in t else None
print(f"all-reduce of {sys.argv[2]} fp32 (logical), 2 ranks in 2 namespaces, veth shaped to 1 Gbit/s (tbf), tcp")
print("| arm | median time (ms) | runs (ms) | bytes sent per rank | speed-up vs fp32 |")
print("|---|---|---|---|---|")
for arm in t:
    m = statistics.median(t[arm])
    runs = ", ".join(f"{x/1000:.0f}" for x in t[arm])
    b = f"{sent[arm]/2**20:.2f} MiB" if arm in sent else "64 MiB (ring: 2(n-1)/n x size)"
    print(f"| {arm} | {m/1000:.1f} | {runs} | {b} | {base/m:.2f}x |" if base else f"| {arm} | {m/1000:.1f} | {runs} | {b} | - |")
PY

#!/usr/bin/env bash
# Compute / communication overlap between two "hosts": network namespaces
# joined by a veth pair shaped with tc to RATE (default 1gbit, tbf on both
# ends; plus netem DELAY each way where the kernel has sch_netem — this
# one may not: the script says so). One process per namespace, tcp between
# them (TESSERA_HOST_ID tells them they are different hosts).
#   1. build/bin/overlap_perf: GEMMs while a 64 MiB all-reduce progresses,
#      against the sum of the two alone (JSON; medians of ITERS).
#   2. The default training config with dp 2 across the two hosts: the
#      fraction of the gradient communication hidden behind backward
#      (summary.json parallel.grad_comm_hidden_fraction; median of REPEATS).
#   sudo bench/overlap.sh [ITERS] [REPEATS] [STEPS]      (needs root: ip netns, tc)
set -euo pipefail
cd "$(dirname "$0")/.."
ITERS=${1:-5}
REPEATS=${2:-3}
STEPS=${3:-40}
BIN=${BIN:-build/bin}
if [ "$(id -u)" -ne 0 ]; then echo "overlap.sh: needs root (ip netns, tc)" >&2; exit 1; fi
. bench/netns_link.sh
AA=10.215.0.1 AB=10.215.0.2
TMP=$(mktemp -d)
cleanup() { netns_link_down; rm -rf "$TMP"; }
trap cleanup EXIT
netns_link_up tsov$$ "$AA" "$AB"
NA=$NS_A NB=$NS_B
SHAPE=$LINK_SHAPE
echo "# link: $SHAPE"

TOKEN=overlap-bench-token-$$-0123456789abcdef
PORT=29610
pair() {  # runs "$@" as one rank per namespace (node 0 in A); rank 0's output to stdout
  PORT=$((PORT + 1))
  for node in 1 0; do
    ns=$NB
    [ "$node" = 0 ] && ns=$NA
    ip netns exec "$ns" env TESSERA_HOST_ID="host$node" TESSERA_JOB_TOKEN="$TOKEN" OMP_NUM_THREADS=1 \
      "$BIN/tessera" launch --nproc 1 --nnodes 2 --node-rank "$node" --master "$AA:$PORT" --connect-timeout 60 \
      -- "$@" >"$TMP/node$node.out" 2>&1 &
  done
  wait
  cat "$TMP/node0.out"
}

echo "# overlap_perf: 64 MiB fp32 all-reduce vs fp32 GEMMs, 1 thread per rank"
pair "$BIN/overlap_perf" --mib 64 --n 1024 --iters "$ITERS" | grep '{' | sed 's/^[^{]*//'

echo "# training: default config, dp 2 across the two hosts, $STEPS steps"
for r in $(seq "$REPEATS"); do
  pair "$BIN/tessera" train configs/train/default.toml --plain --set parallel.dp=2 --set parallel.tp=1 \
    --set parallel.pp=1 --set parallel.ep=1 --set parallel.zero=0 --set train.micro_batch=16 \
    --set train.steps="$STEPS" --set eval.every=0 --set eval.samples=8 --set train.out_dir="$TMP/runs" \
    --set name="dp2-$r" >/dev/null
done
/usr/bin/python3 - "$TMP/runs" "$REPEATS" <<'PYEOF'
import json, statistics, sys
root, n = sys.argv[1], int(sys.argv[2])
rows = [json.load(open(f"{root}/dp2-{r}/summary.json")) for r in range(1, n + 1)]
med = lambda f: statistics.median(f(s) for s in rows)
p = lambda s, k: s["parallel"][k]
print(json.dumps({"runs": n, "tokens_per_s": med(lambda s: s["tokens_per_s"]),
                  "grad_comm_s": med(lambda s: p(s, "grad_comm_s")),
                  "grad_comm_exposed_s": med(lambda s: p(s, "grad_comm_exposed_s")),
                  "grad_comm_hidden_fraction": med(lambda s: p(s, "grad_comm_hidden_fraction") or 0.0),
                  "comm_fraction": med(lambda s: p(s, "comm_fraction"))}))
PYEOF

#!/usr/bin/env bash
# The tile-layer rewrite against the code it replaced (docs/perf.md, "Tile
# GEMM, attention on the tile layer, and the training step"): attention_bench
# and the default GPT training step (one process, 2 threads), this build
# against an older one, alternated.
#   bench/before_after.sh OLD_BUILD_DIR [PAIRS]
# OLD_BUILD_DIR holds bin/tessera and bin/attention_bench built at the older
# commit, e.g. (805d1ee: the last commit before the tile layer):
#   git worktree add /tmp/before 805d1ee && cp bench/attention_bench.cc /tmp/before/bench/
#   (cd /tmp/before && cmake --preset release && cmake --build build --target tessera attention_bench)
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=${1:?usage: bench/before_after.sh OLD_BUILD_DIR [PAIRS]}
PAIRS=${2:-3}
NEW=build
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "== attention_bench, $PAIRS alternated runs each (GFLOP/s)"
for r in $(seq "$PAIRS"); do
  for side in old new; do
    dir=$([ $side = old ] && echo "$OLD" || echo "$NEW")
    "$dir/bin/attention_bench" --benchmark_min_time=0.2 2>/dev/null | grep '^attention' |
      awk -v s=$side '{print s, $1, $NF}' >>"$TMP/attn.txt"
  done
done
"$PY" - "$TMP/attn.txt" <<'PYEOF'
import collections, re, statistics as st, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, name, val = line.split()
    d[(name.replace("/real_time", ""), side)].append(float(re.search(r"GFLOPs=([\d.]+)", val).group(1)))
ratios = []
for name in sorted({k[0] for k in d}):
    o, n = st.median(d[(name, "old")]), st.median(d[(name, "new")])
    ratios.append(n / o)
    print(f"{name}: old {o:.1f}, new {n:.1f}, new/old {n / o:.2f}")
print(f"attention new/old: median {st.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")
PYEOF

echo "== default GPT training step, one process, 2 threads, $((2 * PAIRS)) pairs (tokens/s)"
for r in $(seq $((2 * PAIRS))); do
  line="pair $r:"
  for side in old new; do
    dir=$([ $side = old ] && echo "$OLD" || echo "$NEW")
    rm -rf "$TMP/run"
    OMP_NUM_THREADS=2 "$dir/bin/tessera" train configs/train/default.toml --plain --set parallel.dp=1 \
      --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1 --set train.micro_batch=32 \
      --set train.steps=300 --set eval.every=0 --set train.out_dir=\""$TMP/run"\" --set name=\"b\" >/dev/null 2>&1
    line="$line $side $("$PY" -c "import json,sys;j=json.load(open(sys.argv[1]));print(round(j['tokens_per_s']))" \
      "$TMP/run/b/summary.json")"
  done
  echo "$line"
done | tee "$TMP/gpt.txt"
"$PY" -c "
import statistics as st, sys
r = [float(l.split()[5]) / float(l.split()[3]) for l in open(sys.argv[1])]
print('training step new/old: median %.2f, pairs %s' % (st.median(r), ' '.join('%.2f' % x for x in r)))" "$TMP/gpt.txt"

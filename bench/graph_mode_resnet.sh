#!/usr/bin/env bash
# Graph mode against eager on the image trainer (docs/perf.md, "Graph mode"):
# `tessera train configs/train/resnet50.toml` (ResNet-50 layout, 32x32
# synthetic images, micro-batch 16, global batch 32) for STEPS steps,
# eager and train.graph = true alternated, PAIRS pairs. The first step
# (capture and check: both of its micro-batches) is untimed by the
# trainer, so images/s is over replays. Prints a markdown table of medians:
# images/s, the run's allocator peak, and the paired ratio.
#   [STEPS=60] bench/graph_mode_resnet.sh [BUILD_DIR] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
PAIRS=${2:-3}
STEPS=${STEPS:-60}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for r in $(seq "$PAIRS"); do
  for g in false true; do
    "$BUILD/bin/tessera" train configs/train/resnet50.toml --set train.steps="$STEPS" --set eval.every=0 \
      --set train.graph=$g --set train.out_dir="$TMP/runs-$g-$r" >/dev/null 2>&1
    echo "$g $TMP/runs-$g-$r/resnet50/summary.json" >>"$TMP/index.txt"
  done
done
"$PY" - "$TMP/index.txt" "$STEPS" <<'PYEOF'
import json, statistics as st, sys
runs = {"false": [], "true": []}
for line in open(sys.argv[1]):
    g, path = line.split()
    runs[g].append(json.load(open(path)))
ips = {g: [r["images_per_s"] for r in v] for g, v in runs.items()}
peak = {g: [r["peak_memory_bytes"] / 2**20 for r in v] for g, v in runs.items()}
ratios = [b / a for a, b in zip(ips["false"], ips["true"])]
seg = runs["true"][0]["parallel"]["graph_segments_rank0"][0]
print(f"ResNet trainer, {sys.argv[2]} steps, {len(ratios)} alternated pairs; graph: {seg['mode']}, "
      f"{seg['replays']} replays, kept for the backward {seg['saved_for_backward_bytes'] / 2**20:.1f} MiB "
      f"against the eager tape's {seg['eager_tape_saved_bytes'] / 2**20:.1f} MiB")
print("| eager img/s | graph img/s | graph / eager (median of pairs) | pairs | eager peak MiB | graph peak MiB |")
print("|---|---|---|---|---|---|")
print(f"| {st.median(ips['false']):.1f} | {st.median(ips['true']):.1f} | {st.median(ratios):.3f}x | "
      f"{', '.join(f'{x:.3f}' for x in ratios)} | {st.median(peak['false']):.1f} | {st.median(peak['true']):.1f} |")
PYEOF

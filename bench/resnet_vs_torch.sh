#!/usr/bin/env bash
# ResNet training throughput, Tessera vs PyTorch 1.13 on the same layout,
# batch, image size and optimizer (AdamW), interleaved, medians of REPEATS:
#   tessera train configs/train/resnet50.toml (model.resnet.*, data.image_size
#   overridden per variant; summary.json images_per_s, every step after the
#   first) in NCHW and NHWC, against bench/torch_resnet.py (images / time of
#   the steps after the first) with NCHW and channels_last tensors. The
#   ratio is best layout against best layout. Also prints Tessera's MFU
#   (achieved model FLOP/s / measured fp32 peak of the cores used).
#   bench/resnet_vs_torch.sh [REPEATS] [VARIANT] [THREADS...]
# VARIANT: small — the shipped config (ResNet-50 layout, width 16, 32x32,
#          small stem, batch 32);
#          full  — ResNet-50 itself (width 64, 224x224, batch 32; slow here).
# Run it on an idle machine (this host's speed drifts from minute to minute).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-3}
VARIANT=${2:-small}
shift 2 2>/dev/null || shift $#
THREADS=${*:-"1 2"}
BIN=${BIN:-build/bin/tessera}
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
case "$VARIANT" in
  small) WIDTH=16 SIZE=32 STEM=1 CLASSES=10 BATCH=32 STEPS=6 ;;
  full) WIDTH=64 SIZE=224 STEM=0 CLASSES=1000 BATCH=32 STEPS=3 ;;
  *) echo "unknown variant $VARIANT (small | full)" >&2; exit 2 ;;
esac
STEM_TOML=$([ "$STEM" = 1 ] && echo true || echo false)
field() { "$PY" -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
best() { "$PY" -c "import sys;print(max(map(float,sys.argv[1:])))" "$@"; }
echo "== ResNet-50 layout, $VARIANT: width $WIDTH, ${SIZE}x${SIZE}, batch $BATCH, $STEPS timed steps =="
for t in $THREADS; do
  ts=(); ps=()
  for r in $(seq "$REPEATS"); do
    line="$t threads, repeat $r:"
    tbest=(); for layout in NCHW NHWC; do
      OMP_NUM_THREADS=$t "$BIN" train configs/train/resnet50.toml --plain \
        --set name=\"bench-resnet\" --set train.out_dir=\""$TMP"\" --set train.threads="$t" \
        --set model.resnet.width="$WIDTH" --set model.resnet.small_stem="$STEM_TOML" \
        --set model.resnet.num_classes="$CLASSES" --set model.resnet.layout=\"$layout\" \
        --set data.image_size="$SIZE" --set train.steps=$((STEPS + 1)) --set train.micro_batch="$BATCH" \
        --set train.global_batch="$BATCH" --set eval.samples="$BATCH" --set eval.batch="$BATCH" \
        --set eval.every=0 >/dev/null
      v=$(field "$TMP/bench-resnet/summary.json" images_per_s); m=$(field "$TMP/bench-resnet/summary.json" mfu)
      tbest+=("$v"); line+=$(printf " tessera %s %.2f img/s (MFU %.1f%%)," "$layout" "$v" "$("$PY" -c "print(100*$m)")")
    done
    pbest=(); for cl in "" --channels-last; do
      OMP_NUM_THREADS=$t "$PY" bench/torch_resnet.py --width "$WIDTH" --small-stem "$STEM" --classes "$CLASSES" \
        --size "$SIZE" --batch "$BATCH" --steps "$STEPS" --threads "$t" $cl > "$TMP/torch.json"
      v=$(field "$TMP/torch.json" images_per_s)
      pbest+=("$v"); line+=$(printf " pytorch %s %.2f img/s," "${cl:-NCHW}" "$v")
    done
    ts+=("$(best "${tbest[@]}")"); ps+=("$(best "${pbest[@]}")")
    echo "${line%,}"
  done
  printf "%d threads, best layout of each: " "$t"
  "$PY" bench/median_ratio.py --unit img/s "tessera" "pytorch" "${ts[@]}" -- "${ps[@]}"
done

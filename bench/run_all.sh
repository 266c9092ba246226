#!/usr/bin/env bash
# `make bench`: every benchmark, with the reference libraries in the same run.
# Results are printed; docs/perf.md records them with these commands.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== machine"
build/bin/tessera info | sed -n '1,40p'
for b in build/bin/*_bench; do
  [ -x "$b" ] || continue
  echo "== $b"
  "$b" --benchmark_min_time=0.2
done
echo "== checkpoint overhead per step (asynchronous saving)"
bench/checkpoint_overhead.sh 150 3 10 1
echo "== training throughput vs PyTorch"
bench/compare_torch.sh configs/train/default.toml 40 3
echo "== parallel training: scaling and the default 8-rank mesh"
bench/parallel_scaling.sh 40 3
echo "== data-parallel training vs PyTorch DDP (Gloo)"
bench/compare_torch_ddp.sh configs/train/default.toml 40 3
if [ -x bench/compare_ccl.sh ]; then
  echo "== collectives vs Open MPI and Gloo"
  bench/compare_ccl.sh
fi

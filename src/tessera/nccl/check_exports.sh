#!/bin/sh
# Checks libtessera_nccl.so's dynamic symbols: every NCCL name the header
# declares is exported, and nothing else but tesseraStream* (no C++ names).
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TWDBRV]$/ {print $3}' | sed 's/@.*//' | sort -u)
status=0
for name in ncclGetVersion ncclGetUniqueId ncclGetErrorString ncclGetLastError ncclMemAlloc ncclMemFree \
  ncclCommInitRank ncclCommInitRankConfig ncclCommInitAll ncclCommFinalize ncclCommDestroy ncclCommAbort \
  ncclCommSplit ncclCommGetAsyncError ncclCommCount ncclCommCuDevice ncclCommUserRank ncclCommRegister \
  ncclCommDeregister ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclReduce ncclBcast ncclBroadcast \
  ncclAllReduce ncclReduceScatter ncclAllGather ncclAlltoAll ncclGather ncclScatter ncclSend ncclRecv \
  ncclGroupStart ncclGroupEnd tesseraStreamCreate tesseraStreamSynchronize tesseraStreamQuery \
  tesseraStreamDestroy; do
  if ! echo "$syms" | grep -qx "$name"; then
    echo "missing export: $name"
    status=1
  fi
done
extra=$(echo "$syms" | grep -v -E '^(nccl|pnccl|tesseraStream)' || true)
if [ -n "$extra" ]; then
  echo "unexpected exports (C++ or other names leak):"
  echo "$extra"
  status=1
fi
count=$(echo "$syms" | grep -c -E '^(nccl|tesseraStream)')
echo "exports: $count nccl*/tesseraStream* symbols, nothing else"
exit $status

#!/usr/bin/env bash
# Compares Tessera's collectives with Open MPI and Gloo on this machine, in
# one run, same sizes, same conventions (nccl-tests' size/busbw; buffers
# allocated once; mean over ranks of the per-iteration time; out of place):
#   tessera:  tessera launch --nproc N -- tessera ccl-perf OP ...         (private buffers)
#             tessera launch --nproc N -- tessera ccl-perf OP ... -R 1    (AllocShared buffers: zero copy)
#   Open MPI: mpirun --oversubscribe -np N mpi_coll_perf OP ...   (bench/mpi_coll_perf.c)
#   Gloo:     tessera launch --nproc N -- gloo_coll_perf OP ...  (bench/gloo_coll_perf.cc, tcp device)
# and prints, per op and rank count, each library's time and busbw per size
# with Tessera's speedup (peer time / Tessera time; > 1 = Tessera faster)
# for private and shared buffers, then the issue-3 goal checks (all-reduce
# busbw at 64 MiB >= 1.5x Open MPI and >= 3x Gloo at 2/4/8 ranks, and
# >= 70 % of the memory-bandwidth bound 2·n·S / triad, the two-thread STREAM
# triad measured (`tessera info --remeasure`) right before each all-reduce
# sweep; 8-byte all-reduce at 2 ranks no slower than Open MPI; all-to-all
# busbw at 64 MiB >= 1.5x Open MPI).
#
# usage: bench/compare_ccl.sh [--build DIR] [--ranks "2 4 8"] [--ops "allreduce alltoall"]
#                             [-b 64] [-e 64M] [-f 4] [-n 10] [-w 2] [--no-mpi] [--no-gloo] [--no-latency]
#                             [--no-shared] [--repeats R]
# --repeats R runs every (op, ranks) cell R times, the libraries interleaved
# in each round, and reports per-size medians (this host's speed drifts
# 10-25 % from minute to minute; single runs vary up to 2x).
# Besides the sweep, an 8-byte all-reduce latency pass (2000 iterations)
# runs at 2 ranks.
# Needs the build's tessera, mpi_coll_perf and gloo_coll_perf (cmake with
# TESSERA_BUILD_BENCH=ON; the last two only when Open MPI / Gloo are installed).
# Extra ccl-perf flags: TESSERA_PERF_ARGS="-z 1". Run it on an idle machine.
set -euo pipefail

BUILD=build
RANKS="2 4 8"
OPS="allreduce alltoall"
MINB=64
MAXB=64M
FACTOR=4
ITERS=10
WARMUP=2
USE_MPI=1
USE_GLOO=1
LATENCY=1
SHARED=1
REPEATS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) BUILD="$2"; shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --ops) OPS="$2"; shift 2 ;;
    -b) MINB="$2"; shift 2 ;;
    -e) MAXB="$2"; shift 2 ;;
    -f) FACTOR="$2"; shift 2 ;;
    -n) ITERS="$2"; shift 2 ;;
    -w) WARMUP="$2"; shift 2 ;;
    --no-mpi) USE_MPI=0; shift ;;
    --no-gloo) USE_GLOO=0; shift ;;
    --no-latency) LATENCY=0; shift ;;
    --no-shared) SHARED=0; shift ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

TESSERA="$BUILD/bin/tessera"
MPIBIN="$BUILD/bin/mpi_coll_perf"
GLOOBIN="$BUILD/bin/gloo_coll_perf"
[[ -x "$TESSERA" ]] || { echo "no $TESSERA (build the tessera target)" >&2; exit 1; }
if [[ $USE_MPI == 1 && ( ! -x "$MPIBIN" || -z "$(command -v mpirun)" ) ]]; then
  echo "# Open MPI benchmark unavailable ($MPIBIN or mpirun missing): skipped" >&2; USE_MPI=0
fi
if [[ $USE_GLOO == 1 && ! -x "$GLOOBIN" ]]; then
  echo "# Gloo benchmark unavailable ($GLOOBIN missing): skipped" >&2; USE_GLOO=0
fi
MPIRUN=(mpirun --oversubscribe --bind-to none)
[[ $(id -u) == 0 ]] && MPIRUN+=(--allow-run-as-root)

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
COMMON=(-b "$MINB" -e "$MAXB" -f "$FACTOR" -n "$ITERS" -w "$WARMUP")

# Data rows -> "size time_us busbw" (strips the launcher's "[rank 0] " prefix).
rows() { sed -e 's/^\[rank [0-9]*\] //' "$1" | awk '$1 ~ /^[0-9]+$/ && NF >= 8 { print $1, $6, $8 }'; }
avg_line() { sed -e 's/^\[rank [0-9]*\] //' "$1" | awk -F: '/Avg bus bandwidth/ { gsub(/ /, "", $2); print $2 }' | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
# Per-size medians of "size time busbw" rows from several rounds.
median_rows() {
  awk '{ t[$1] = t[$1] " " $2; b[$1] = b[$1] " " $3 }
       function med(list,   a, n, i, j, x) { n = split(list, a, " ");
         for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > x + 0; j--) a[j + 1] = a[j]; a[j + 1] = x }
         return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
       END { for (s in t) print s, med(t[s]), med(b[s]) }'
}

echo "# compare_ccl: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# sizes $MINB..$MAXB x$FACTOR, $ITERS iterations ($WARMUP warm-up), float sum, out of place; medians of $REPEATS round(s)"
GOALS=()
if [[ $LATENCY == 1 ]]; then
  lt="$WORK/lat.t"; lm="$WORK/lat.m"
  # shellcheck disable=SC2086
  "$TESSERA" launch --nproc 2 -- "$TESSERA" ccl-perf allreduce -b 8 -e 8 -n 2000 -w 200 -c 0 ${TESSERA_PERF_ARGS:-} >"$lt" 2>&1 || true
  : >"$lm"
  [[ $USE_MPI == 1 ]] && { "${MPIRUN[@]}" -np 2 "$MPIBIN" allreduce -b 8 -e 8 -n 2000 -w 200 >"$lm" 2>&1 || true; }
  t8=$(rows "$lt" | awk '$1 == 8 { print $2 }'); m8=$(rows "$lm" | awk '$1 == 8 { print $2 }')
  echo
  echo "## 8-byte all-reduce, 2 ranks, 2000 iterations: tessera ${t8:-?} us, open-mpi ${m8:--} us"
  GOALS+=("allreduce 8 B n=2: tessera ${t8:-?} us vs MPI ${m8:--} us (goal: tessera <= MPI)")
fi
for op in $OPS; do
  for n in $RANKS; do
    t="$WORK/t.$op.$n"; z="$WORK/z.$op.$n"; m="$WORK/m.$op.$n"; g="$WORK/g.$op.$n"
    triads=()
    : >"$t"; : >"$z"; : >"$m"; : >"$g"
    for ((round = 1; round <= REPEATS; round++)); do
      if [[ "$op" == allreduce ]]; then
        triads+=("$("$TESSERA" info --remeasure 2>/dev/null | sed -n 's/.*GB\/s on 1 thread, \([0-9.]*\) GB\/s on.*/\1/p' | head -1)")
      fi
      # shellcheck disable=SC2086
      "$TESSERA" launch --nproc "$n" -- "$TESSERA" ccl-perf "$op" "${COMMON[@]}" -c 0 ${TESSERA_PERF_ARGS:-} >>"$t" 2>"$t.err" \
        || { echo "tessera ccl-perf failed:" >&2; cat "$t.err" >&2; exit 1; }
      if [[ $SHARED == 1 ]]; then
        # shellcheck disable=SC2086
        "$TESSERA" launch --nproc "$n" -- "$TESSERA" ccl-perf "$op" "${COMMON[@]}" -c 0 -R 1 ${TESSERA_PERF_ARGS:-} >>"$z" 2>"$z.err" \
          || { echo "tessera ccl-perf -R 1 failed:" >&2; cat "$z.err" >&2; exit 1; }
      fi
      if [[ $USE_MPI == 1 ]]; then
        "${MPIRUN[@]}" -np "$n" "$MPIBIN" "$op" "${COMMON[@]}" >>"$m" 2>"$m.err" || echo "# Open MPI run failed (see below)" >&2
      fi
      if [[ $USE_GLOO == 1 && "$op" != "reducescatter" ]]; then
        store=$(mktemp -d "$WORK/gloo.XXXX")
        GLOO_STORE_DIR="$store" "$TESSERA" launch --nproc "$n" -- "$GLOOBIN" "$op" "${COMMON[@]}" >>"$g" 2>"$g.err" \
          || echo "# Gloo run failed" >&2
      fi
    done
    triad=""
    [[ ${#triads[@]} -gt 0 ]] && triad=$(printf "%s\n" "${triads[@]}" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    echo
    echo "## $op, $n ranks   (time in us; busbw in GB/s; speedup = peer time / tessera time; shared = -R 1)"
    printf "%12s  %10s %10s %10s %10s  %8s %8s %8s %8s  %8s %8s %9s\n" size tessera_us shared_us mpi_us gloo_us \
      t_busbw sh_busbw mpi_bw gloo_bw "x MPI" "x MPI sh" "x Gloo"
    join -a1 -e - -o 0,1.2,1.3,2.2,2.3 <(rows "$t" | median_rows | sort -k1,1) <(rows "$z" | median_rows | sort -k1,1) >"$WORK/tz" || true
    join -a1 -e - -o 0,1.2,1.3,1.4,1.5,2.2,2.3 "$WORK/tz" <(rows "$m" | median_rows | sort -k1,1) >"$WORK/tzm" || true
    join -a1 -e - -o 0,1.2,1.3,1.4,1.5,1.6,1.7,2.2,2.3 "$WORK/tzm" <(rows "$g" | median_rows | sort -k1,1) | sort -n -k1,1 |
      awk '{ vm = ($6 == "-" || $2 == 0) ? "-" : sprintf("%.2f", $6 / $2);
             vz = ($6 == "-" || $4 == "-" || $4 == 0) ? "-" : sprintf("%.2f", $6 / $4);
             vg = ($8 == "-" || $2 == 0) ? "-" : sprintf("%.2f", $8 / $2);
             printf "%12s  %10s %10s %10s %10s  %8s %8s %8s %8s  %8s %8s %9s\n", $1, $2, $4, $6, $8, $3, $5, $7, $9, vm, vz, vg }' |
      tee "$WORK/table.$op.$n"
    echo "# avg busbw: tessera $(avg_line "$t")  shared $(avg_line "$z")  open-mpi $(avg_line "$m")  gloo $(avg_line "$g")"
    big=$(awk '$1 == 67108864 { print }' "$WORK/table.$op.$n")
    if [[ "$op" == allreduce && -n "$big" ]]; then
      bound=""
      if [[ -n "$triad" ]]; then
        # 2·n·S bytes at the triad rate (GB/s = 1000 bytes/us); percent of it reached.
        bound=$(echo "$big" | awk -v n="$n" -v bw="$triad" '{ b = 2 * n * $1 / (bw * 1000);
          p = ($2 == "-") ? "-" : sprintf("%.0f", 100 * b / $2); z = ($3 == "-") ? "-" : sprintf("%.0f", 100 * b / $3);
          printf "bound %.0f us at triad %s GB/s: private %s %%, shared %s %% (goal >= 70)", b, bw, p, z }')
      fi
      GOALS+=("allreduce 64MiB n=$n: x$(echo "$big" | awk '{print $10}') vs MPI, shared x$(echo "$big" | awk '{print $11}') (goal >= 1.5); x$(echo "$big" | awk '{print $12}') vs Gloo (goal >= 3); ${bound:-no triad}")
    fi
    if [[ "$op" == alltoall && -n "$big" ]]; then
      GOALS+=("alltoall 64MiB n=$n: x$(echo "$big" | awk '{print $10}') vs MPI, shared x$(echo "$big" | awk '{print $11}') (goal >= 1.5)")
    fi
  done
done
echo
echo "# issue-3 goals"
for line in "${GOALS[@]}"; do echo "  $line"; done

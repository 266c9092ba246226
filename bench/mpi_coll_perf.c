/* mpi_coll_perf: an osu/nccl-tests-style sweep of one Open MPI collective,
 * the reference that bench/compare_ccl.sh runs beside `tessera ccl-perf`.
 *
 *   mpirun --oversubscribe -np N mpi_coll_perf OP -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP
 *   OP: allreduce | allgather | reducescatter | alltoall | broadcast | reduce   (float, sum)
 *
 * Same conventions as ccl-perf: `size` is the per-rank buffer in bytes (the
 * whole gathered array for allgather/reducescatter/alltoall); buffers are
 * allocated and touched once at the largest size (so first-touch page faults
 * are not timed); time = mean over ranks of each rank's mean per iteration
 * (out of place); busbw uses nccl-tests' factors. Prints rows
 *   size count time(us) algbw busbw
 * and "# Avg bus bandwidth    : X". */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024.0;
  if (end && (*end == 'M' || *end == 'm')) v *= 1024.0 * 1024.0;
  if (end && (*end == 'G' || *end == 'g')) v *= 1024.0 * 1024.0 * 1024.0;
  return (size_t)v;
}

static void* alloc_touched(size_t bytes) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 1, bytes);
  return p;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: %s OP [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const char* op = argv[1];
  size_t min_bytes = 8, max_bytes = 64u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) min_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) max_bytes = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-f")) factor = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warmup = atoi(argv[i + 1]);
  }
  int kind = !strcmp(op, "allreduce") ? 0 : !strcmp(op, "allgather") ? 1 : !strcmp(op, "reducescatter") ? 2
           : !strcmp(op, "alltoall") ? 3 : !strcmp(op, "broadcast") ? 4 : !strcmp(op, "reduce") ? 5 : -1;
  if (kind < 0) {
    if (rank == 0) fprintf(stderr, "unknown op '%s'\n", op);
    MPI_Finalize();
    return 2;
  }
  const double bus = kind == 0 ? 2.0 * (n - 1) / n : (kind <= 3 ? (double)(n - 1) / n : 1.0);
  float* send = alloc_touched(max_bytes + 64);
  float* recv = alloc_touched(max_bytes + 64);
  if (rank == 0) {
    printf("# Open MPI %s over %d rank(s), float sum, out of place\n", op, n);
    printf("#       size         count      type   redop    root     time   algbw   busbw\n");
    printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n");
  }
  double bw_sum = 0;
  int rows = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    size_t total = bytes / sizeof(float);
    size_t count = (kind >= 1 && kind <= 3) ? total / n : total;
    size_t elements = (kind >= 1 && kind <= 3) ? count * n : count;
    for (int it = 0; it < warmup; ++it) {
      switch (kind) {
        case 0: MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case 1: MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
        case 2: MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case 3: MPI_Alltoall(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
        case 4: MPI_Bcast(send, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
        case 5: MPI_Reduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
      }
    }
    /* Timed loop (separate so the clock brackets exactly `iters` calls). */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) {
      switch (kind) {
        case 0: MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case 1: MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
        case 2: MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case 3: MPI_Alltoall(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD); break;
        case 4: MPI_Bcast(send, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
        case 5: MPI_Reduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
      }
    }
    double mine = (MPI_Wtime() - t0) / (iters > 0 ? iters : 1), sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double t = sum / n;
    size_t size = elements * sizeof(float);
    double algbw = t > 0 ? (double)size / t / 1e9 : 0;
    if (rank == 0) {
      printf("%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f\n", size, count, "float",
             (kind == 0 || kind == 2 || kind == 5) ? "sum" : "none", (kind >= 4) ? 0 : -1, t * 1e6, algbw,
             algbw * bus);
      fflush(stdout);
    }
    bw_sum += algbw * bus;
    ++rows;
    size_t next = (size_t)ceil((double)bytes * factor);
    if (next <= bytes) break;
    bytes = next;
  }
  if (rank == 0) printf("# Avg bus bandwidth    : %g \n#\n", rows ? bw_sum / rows : 0.0);
  MPI_Finalize();
  return 0;
}

/* A plain C11 NCCL program: sees only tessera/nccl.h, links only
 * libtessera_nccl.so. Usage: nccl_c_api [nranks] (default 4). Forks nranks
 * processes; rank 0 writes two unique ids to a file, the others poll for
 * it. Checks every collective, PreMulSum, split (with NCCL_SPLIT_NOCOLOR),
 * a grouped send/recv ring, a stream, non-blocking init and abort.
 * Exits 0 when every rank passed. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tessera/nccl.h"

static int g_rank = -1;
static int g_failures = 0;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "rank %d: line %d: ", g_rank, __LINE__);  \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      g_failures++;                                             \
    }                                                           \
  } while (0)

#define NCCL(call)                                                                                    \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      fprintf(stderr, "rank %d: line %d: %s -> %s: %s\n", g_rank, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                \
      exit(2);                                                                                        \
    }                                                                                                 \
  } while (0)

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void SleepMs(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  nanosleep(&ts, NULL);
}

/* Rank 0 writes the ids (to a temporary name, then renamed); the others
 * poll for the file for up to 30 s. */
static int ShareIds(const char* path, ncclUniqueId ids[2]) {
  if (g_rank == 0) {
    char tmp[512];
    FILE* f;
    NCCL(ncclGetUniqueId(&ids[0]));
    NCCL(ncclGetUniqueId(&ids[1]));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(ids, sizeof(ncclUniqueId), 2, f) != 2 || fclose(f) != 0) return -1;
    return rename(tmp, path);
  } else {
    double deadline = Now() + 30.0;
    while (Now() < deadline) {
      FILE* f = fopen(path, "rb");
      if (f != NULL) {
        size_t got = fread(ids, sizeof(ncclUniqueId), 2, f);
        fclose(f);
        if (got == 2) return 0;
      }
      SleepMs(5);
    }
    fprintf(stderr, "rank %d: no unique id file %s after 30 s\n", g_rank, path);
    return -1;
  }
}

static void Collectives(ncclComm_t comm, int n) {
  const size_t count = 1000;
  size_t i;
  int q;
  float* fs = malloc(sizeof(float) * count * (size_t)n);
  float* fr = malloc(sizeof(float) * count * (size_t)n);
  int* is = malloc(sizeof(int) * count * (size_t)n);
  int* ir = malloc(sizeof(int) * count * (size_t)n);
  for (i = 0; i < count * (size_t)n; ++i) {
    fs[i] = (float)(g_rank + 1);
    is[i] = g_rank * 1000 + (int)i;
  }
  /* all-reduce */
  NCCL(ncclAllReduce(fs, fr, count, ncclFloat, ncclSum, comm, NULL));
  CHECK(fr[count - 1] == (float)(n * (n + 1) / 2), "allreduce %f", fr[count - 1]);
  NCCL(ncclAllReduce(is, ir, count, ncclInt32, ncclMax, comm, NULL));
  CHECK(ir[7] == (n - 1) * 1000 + 7, "allreduce max %d", ir[7]);
  /* reduce to root n-1 */
  NCCL(ncclReduce(fs, fr, count, ncclFloat32, ncclProd, n - 1, comm, NULL));
  if (g_rank == n - 1) CHECK(fr[3] == 24.0f || n != 4, "reduce prod %f", fr[3]);
  /* broadcast from root 1, and in place */
  NCCL(ncclBroadcast(is, ir, count, ncclInt, 1, comm, NULL));
  CHECK(ir[5] == 1005, "broadcast %d", ir[5]);
  memcpy(ir, is, sizeof(int) * count);
  NCCL(ncclBcast(ir, count, ncclInt, 2 % n, comm, NULL));
  CHECK(ir[9] == (2 % n) * 1000 + 9, "bcast %d", ir[9]);
  /* all-gather */
  NCCL(ncclAllGather(is, ir, count, ncclInt32, comm, NULL));
  for (q = 0; q < n; ++q) CHECK(ir[(size_t)q * count + 3] == q * 1000 + 3, "allgather block %d", q);
  /* reduce-scatter */
  NCCL(ncclReduceScatter(is, ir, count, ncclInt32, ncclSum, comm, NULL));
  {
    int want = 0;
    for (q = 0; q < n; ++q) want += q * 1000 + g_rank * (int)count + 4;
    CHECK(ir[4] == want, "reducescatter %d want %d", ir[4], want);
  }
  /* all-to-all */
  NCCL(ncclAlltoAll(is, ir, count, ncclInt32, comm, NULL));
  for (q = 0; q < n; ++q) {
    CHECK(ir[(size_t)q * count + 1] == q * 1000 + g_rank * (int)count + 1, "alltoall from %d", q);
  }
  /* gather to root 2, scatter from root 3 */
  NCCL(ncclGather(is, ir, count, ncclInt32, 2 % n, comm, NULL));
  if (g_rank == 2 % n) {
    for (q = 0; q < n; ++q) CHECK(ir[(size_t)q * count] == q * 1000, "gather from %d", q);
  }
  NCCL(ncclScatter(is, ir, count, ncclInt32, 3 % n, comm, NULL));
  CHECK(ir[0] == (3 % n) * 1000 + g_rank * (int)count, "scatter %d", ir[0]);
  free(fs);
  free(fr);
  free(is);
  free(ir);
}

static void PreMulSumAndMemAlloc(ncclComm_t comm, int n) {
  double scale = 1.0 / n;
  ncclRedOp_t avg;
  double* x = NULL;
  size_t i, count = 1 << 18;
  NCCL(ncclMemAlloc((void**)&x, sizeof(double) * count));
  for (i = 0; i < count; ++i) x[i] = (double)(g_rank + 1);
  NCCL(ncclRedOpCreatePreMulSum(&avg, &scale, ncclDouble, ncclScalarHostImmediate, comm));
  NCCL(ncclAllReduce(x, x, count, ncclDouble, avg, comm, NULL));
  CHECK(x[count - 1] == (n + 1) / 2.0, "premulsum avg %f", x[count - 1]);
  NCCL(ncclRedOpDestroy(avg, comm));
  NCCL(ncclMemFree(x));
}

static void Split(ncclComm_t comm) {
  ncclComm_t sub = NULL;
  int color = g_rank == 3 ? NCCL_SPLIT_NOCOLOR : g_rank % 2;
  int size = 0, me = -1;
  long long v = g_rank, sum = -1;
  NCCL(ncclCommSplit(comm, color, g_rank, &sub, NULL));
  if (color == NCCL_SPLIT_NOCOLOR) {
    CHECK(sub == NULL, "NOCOLOR gave a communicator");
    return;
  }
  CHECK(sub != NULL, "no split communicator");
  NCCL(ncclCommCount(sub, &size));
  NCCL(ncclCommUserRank(sub, &me));
  CHECK(me == g_rank / 2, "split rank %d", me);
  NCCL(ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL));
  CHECK(sum == (g_rank % 2 == 0 ? 2 : 1), "split sum %lld (size %d)", sum, size);
  NCCL(ncclCommDestroy(sub));
}

static void GroupedRingOnAStream(ncclComm_t comm, int n) {
  const size_t count = 1 << 19; /* 2 MiB of float each way */
  int next = (g_rank + 1) % n, prev = (g_rank + n - 1) % n;
  float* a = malloc(sizeof(float) * count);
  float* b = malloc(sizeof(float) * count);
  float* c = malloc(sizeof(float) * count);
  float* d = malloc(sizeof(float) * count);
  cudaStream_t stream;
  size_t i;
  for (i = 0; i < count; ++i) {
    a[i] = (float)g_rank;
    b[i] = (float)(100 + g_rank);
  }
  NCCL(tesseraStreamCreate(&stream));
  NCCL(ncclGroupStart());
  NCCL(ncclSend(a, count, ncclFloat, next, comm, stream));
  NCCL(ncclSend(b, count, ncclFloat, prev, comm, stream));
  NCCL(ncclRecv(c, count, ncclFloat, prev, comm, stream));
  NCCL(ncclRecv(d, count, ncclFloat, next, comm, stream));
  NCCL(ncclGroupEnd());
  NCCL(ncclAllReduce(a, a, count, ncclFloat, ncclSum, comm, stream));
  NCCL(tesseraStreamSynchronize(stream));
  CHECK(c[count - 1] == (float)prev, "ring from prev %f", c[count - 1]);
  CHECK(d[0] == (float)(100 + next), "ring from next %f", d[0]);
  CHECK(a[0] == (float)(n * (n - 1) / 2), "stream allreduce %f", a[0]);
  NCCL(tesseraStreamDestroy(stream));
  free(a);
  free(b);
  free(c);
  free(d);
}

/* Non-blocking init on the second id, then rank n-1 aborts while the
 * others wait for it in an all-reduce: they must fail, not hang. */
static void NonBlockingAndAbort(ncclUniqueId id, int n) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL;
  ncclResult_t r, state = ncclInProgress;
  double deadline;
  float x[256];
  int i;
  config.blocking = 0;
  r = ncclCommInitRankConfig(&comm, n, id, g_rank, &config);
  CHECK(r == ncclInProgress, "non-blocking init returned %d", (int)r);
  deadline = Now() + 30.0;
  while (state == ncclInProgress && Now() < deadline) {
    NCCL(ncclCommGetAsyncError(comm, &state));
    SleepMs(1);
  }
  CHECK(state == ncclSuccess, "non-blocking init ended with %d: %s", (int)state, ncclGetLastError(comm));
  for (i = 0; i < 256; ++i) x[i] = 1.0f;
  NCCL(ncclAllReduce(x, x, 256, ncclFloat, ncclSum, comm, NULL));
  CHECK(x[255] == (float)n, "non-blocking comm allreduce %f", x[255]);
  if (g_rank == n - 1) {
    NCCL(ncclCommAbort(comm));
    return;
  }
  {
    double t0 = Now();
    r = ncclAllReduce(x, x, 256, ncclFloat, ncclSum, comm, NULL);
    CHECK(r != ncclSuccess, "all-reduce with an aborted peer succeeded");
    CHECK(strlen(ncclGetLastError(comm)) > 0, "no last error");
    CHECK(Now() - t0 < 15.0, "took %.1f s to notice the aborted peer", Now() - t0);
  }
  NCCL(ncclCommAbort(comm));
}

static int RunRank(const char* id_path, int n) {
  ncclUniqueId ids[2];
  ncclComm_t comm = NULL;
  int version = 0, count = 0, me = -1, dev = -1;
  int token = 1, total = 0;
  NCCL(ncclGetVersion(&version));
  CHECK(version == NCCL_VERSION_CODE, "version %d", version);
  if (ShareIds(id_path, ids) != 0) return 2;
  NCCL(ncclCommInitRank(&comm, n, ids[0], g_rank));
  NCCL(ncclCommCount(comm, &count));
  NCCL(ncclCommUserRank(comm, &me));
  NCCL(ncclCommCuDevice(comm, &dev));
  CHECK(count == n && me == g_rank && dev == 0, "count %d rank %d device %d", count, me, dev);
  Collectives(comm, n);
  PreMulSumAndMemAlloc(comm, n);
  if (n == 4) Split(comm);
  GroupedRingOnAStream(comm, n);
  NonBlockingAndAbort(ids[1], n);
  /* Everyone is done before rank 0 (the rendezvous host) leaves. */
  NCCL(ncclAllReduce(&token, &total, 1, ncclInt, ncclSum, comm, NULL));
  CHECK(total == n, "final barrier %d", total);
  NCCL(ncclCommFinalize(comm));
  NCCL(ncclCommDestroy(comm));
  if (g_failures == 0) printf("rank %d: ok\n", g_rank);
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4;
  char path[256];
  pid_t pids[64];
  int r, failed = 0;
  double deadline;
  if (n < 2 || n > 64) {
    fprintf(stderr, "usage: nccl_c_api [nranks 2..64]\n");
    return 2;
  }
  snprintf(path, sizeof(path), "/tmp/nccl_c_api.%ld.id", (long)getpid());
  unlink(path);
  for (r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      return 2;
    }
    if (pids[r] == 0) {
      g_rank = r;
      alarm(100); /* never hang */
      {
        int rc = RunRank(path, n);
        fflush(stdout);
        fflush(stderr);
        _exit(rc);
      }
    }
  }
  deadline = Now() + 110.0;
  for (r = 0; r < n; ++r) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids[r], &status, WNOHANG)) == 0 && Now() < deadline) SleepMs(10);
    if (got != pids[r]) {
      fprintf(stderr, "rank %d did not finish; killing it\n", r);
      kill(pids[r], SIGKILL);
      waitpid(pids[r], &status, 0);
      failed = 1;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, status);
      failed = 1;
    }
  }
  unlink(path);
  if (failed) {
    printf("nccl_c_api: FAILED\n");
  } else {
    printf("nccl_c_api: %d ranks passed\n", n);
  }
  return failed;
}

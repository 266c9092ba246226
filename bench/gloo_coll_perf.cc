// gloo_coll_perf: an nccl-tests-style sweep of one Gloo collective over
// Gloo's TCP transport (loopback), the reference bench/compare_ccl.sh runs
// beside `tessera ccl-perf`. Ranks come from RANK / WORLD_SIZE (run under
// `tessera launch --nproc N`); they meet through a Gloo FileStore in
// GLOO_STORE_DIR (a fresh directory per run).
//
//   GLOO_STORE_DIR=/tmp/x tessera launch --nproc N -- gloo_coll_perf OP -b MIN -e MAX -f F -n ITERS -w WARMUP
//   OP: allreduce (ring) | allgather | alltoall | broadcast | reduce     (float, sum)
//
// Buffers are allocated and touched once at the largest size; time = mean
// over ranks of each rank's mean per iteration; busbw uses nccl-tests'
// factors. Output rows: size count type redop root time(us) algbw busbw,
// then "# Avg bus bandwidth    : X".
#include <sys/mman.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

namespace {

size_t ParseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024.0;
  if (end && (*end == 'M' || *end == 'm')) v *= 1024.0 * 1024.0;
  if (end && (*end == 'G' || *end == 'g')) v *= 1024.0 * 1024.0 * 1024.0;
  return static_cast<size_t>(v);
}

float* AllocTouched(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 0, bytes);
  return static_cast<float*>(p);
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OP [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n", argv[0]);
    return 2;
  }
  const std::string op = argv[1];
  size_t min_bytes = 8, max_bytes = 64u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "-b")) min_bytes = ParseSize(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-e")) max_bytes = ParseSize(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-f")) factor = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-n")) iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "-w")) warmup = std::atoi(argv[i + 1]);
  }
  const int kind = op == "allreduce" ? 0 : op == "allgather" ? 1 : op == "alltoall" ? 3 : op == "broadcast" ? 4
                 : op == "reduce" ? 5 : -1;
  if (kind < 0) {
    std::fprintf(stderr, "unknown op '%s' (allreduce, allgather, alltoall, broadcast, reduce)\n", op.c_str());
    return 2;
  }
  const int rank = EnvInt("RANK", 0);
  const int n = EnvInt("WORLD_SIZE", 1);
  const char* dir = std::getenv("GLOO_STORE_DIR");
  if (dir == nullptr) {
    std::fprintf(stderr, "set GLOO_STORE_DIR to a fresh directory shared by the ranks\n");
    return 2;
  }
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(dir);
  gloo::rendezvous::PrefixStore store("gloo_coll_perf", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, n);
  context->connectFullMesh(store, device);

  const double bus = kind == 0 ? 2.0 * (n - 1) / n : kind <= 3 ? static_cast<double>(n - 1) / n : 1.0;
  float* send = AllocTouched(max_bytes + 64);
  float* recv = AllocTouched(max_bytes + 64);
  uint32_t tag = 0;
  auto run = [&](size_t count) {
    ++tag;
    switch (kind) {
      case 0: {
        gloo::AllreduceOptions o(context);
        o.setInput(send, count);
        o.setOutput(recv, count);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        o.setTag(tag);
        gloo::allreduce(o);
        break;
      }
      case 1: {
        gloo::AllgatherOptions o(context);
        o.setInput(send, count);
        o.setOutput(recv, count * n);
        o.setTag(tag);
        gloo::allgather(o);
        break;
      }
      case 3: {
        gloo::AlltoallOptions o(context);
        o.setInput(send, count * n);
        o.setOutput(recv, count * n);
        o.setTag(tag);
        gloo::alltoall(o);
        break;
      }
      case 4: {
        gloo::BroadcastOptions o(context);
        if (rank == 0) o.setInput(send, count);
        o.setOutput(recv, count);
        o.setRoot(0);
        o.setTag(tag);
        gloo::broadcast(o);
        break;
      }
      case 5: {
        gloo::ReduceOptions o(context);
        o.setInput(send, count);
        o.setOutput(recv, count);
        o.setRoot(0);
        o.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        o.setTag(tag);
        gloo::reduce(o);
        break;
      }
    }
  };
  auto barrier_mean = [&](double mine) {
    // Mean over ranks with a float all-reduce (tiny; ring).
    float v[1] = {static_cast<float>(mine)}, out[1];
    gloo::AllreduceOptions o(context);
    o.setInput(v, 1);
    o.setOutput(out, 1);
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    o.setTag(++tag);
    gloo::allreduce(o);
    return static_cast<double>(out[0]) / n;
  };
  if (rank == 0) {
    std::printf("# Gloo %s over %d rank(s) (tcp device on loopback), float sum, out of place\n", op.c_str(), n);
    std::printf("#       size         count      type   redop    root     time   algbw   busbw\n");
    std::printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)\n");
  }
  double bw_sum = 0;
  int rows = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes;) {
    const size_t total = bytes / sizeof(float);
    const size_t count = (kind >= 1 && kind <= 3) ? total / n : total;
    const size_t elements = (kind >= 1 && kind <= 3) ? count * n : count;
    if (count == 0) {
      bytes = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * factor));
      continue;
    }
    for (int i = 0; i < warmup; ++i) run(count);
    barrier_mean(0);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run(count);
    const double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    const double t = barrier_mean(mine);
    const size_t size = elements * sizeof(float);
    const double algbw = t > 0 ? static_cast<double>(size) / t / 1e9 : 0;
    if (rank == 0) {
      std::printf("%12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f\n", size, count, "float",
                  (kind == 0 || kind == 5) ? "sum" : "none", kind >= 4 ? 0 : -1, t * 1e6, algbw, algbw * bus);
      std::fflush(stdout);
    }
    bw_sum += algbw * bus;
    ++rows;
    const size_t next = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * factor));
    if (next <= bytes) break;
    bytes = next;
  }
  if (rank == 0) std::printf("# Avg bus bandwidth    : %g \n#\n", rows ? bw_sum / rows : 0.0);
  return 0;
}

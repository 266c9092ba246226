// Measures the cost model's constants with every rank of the communicator
// running at once (see cost_model.h).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "tessera/comm/algo/cost_model.h"
#include "tessera/comm/algo/reduce_kernels.h"
#include "tessera/comm/transport/shm/context.h"

namespace tessera::comm::algo {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Status Sync(AlgoEnv& env) {
  CollectiveArgs a;
  a.kind = CollectiveKind::kBarrier;
  return env.shm ? ShmDirectBarrier(a, env) : TreeBarrier(a, env);
}

Status RingStep(AlgoEnv& env, const void* send, void* recv, size_t bytes) {
  const int right = (env.rank + 1) % env.size;
  const int left = (env.rank + env.size - 1) % env.size;
  return env.transport->SendRecv(right, send, bytes, left, recv, bytes, 0x7ca1, *env.ctx);
}

}  // namespace

StatusOr<CostConstants> MeasureConstants(AlgoEnv& env) {
  CostConstants c = DefaultConstants(env.transport->kind(), env.size);
  const int n = env.size;
  const size_t bytes = env.shm ? env.shm->window_bytes() : (1 << 20);
  uint8_t* a = env.scratch->Get(0, bytes);
  uint8_t* b = env.scratch->Get(1, bytes);
  std::memset(a, 1, bytes);
  std::memset(b, 2, bytes);

  if (env.shm != nullptr) {
    for (int i = 0; i < 5; ++i) TESSERA_RETURN_IF_ERROR(Sync(env));
    constexpr int kBarriers = 40;
    double t0 = Now();
    for (int i = 0; i < kBarriers; ++i) TESSERA_RETURN_IF_ERROR(Sync(env));
    c.barrier_s = std::max(1e-8, (Now() - t0) / kBarriers);

    constexpr int kCopies = 4;
    TESSERA_RETURN_IF_ERROR(Sync(env));
    t0 = Now();
    for (int i = 0; i < kCopies; ++i) std::memcpy(b, a, bytes);
    TESSERA_RETURN_IF_ERROR(Sync(env));
    c.copy_s_per_byte = std::max(1e-13, (Now() - t0 - c.barrier_s) / (kCopies * static_cast<double>(bytes)));

    const void* srcs[2] = {a, b};
    TESSERA_RETURN_IF_ERROR(Sync(env));
    t0 = Now();
    for (int i = 0; i < kCopies; ++i) {
      ReduceMany(b, srcs, 2, bytes / 2 / sizeof(float), DataType::kFloat32, ReduceOp::kSum, 0);
    }
    TESSERA_RETURN_IF_ERROR(Sync(env));
    c.reduce_s_per_byte = std::max(1e-13, (Now() - t0 - c.barrier_s) / (kCopies * static_cast<double>(bytes)));
  }

  if (n > 1) {
    for (int i = 0; i < 3; ++i) TESSERA_RETURN_IF_ERROR(RingStep(env, a, b, 0));
    constexpr int kPings = 20;
    double t0 = Now();
    for (int i = 0; i < kPings; ++i) TESSERA_RETURN_IF_ERROR(RingStep(env, a, b, 0));
    c.p2p_latency_s = std::max(1e-8, (Now() - t0) / kPings);
    const size_t big = std::min<size_t>(bytes, 1 << 20);
    TESSERA_RETURN_IF_ERROR(RingStep(env, a, b, big));
    constexpr int kStreams = 3;
    t0 = Now();
    for (int i = 0; i < kStreams; ++i) TESSERA_RETURN_IF_ERROR(RingStep(env, a, b, big));
    c.p2p_s_per_byte =
        std::max(1e-13, ((Now() - t0) / kStreams - c.p2p_latency_s) / static_cast<double>(big));
  }

  // Agree: the maximum of every constant over the ranks.
  double mine[5] = {c.barrier_s, c.copy_s_per_byte, c.reduce_s_per_byte, c.p2p_latency_s, c.p2p_s_per_byte};
  double agreed[5];
  CollectiveArgs r;
  r.kind = CollectiveKind::kAllReduce;
  r.send = mine;
  r.recv = agreed;
  r.count = 5;
  r.dtype = DataType::kFloat64;
  r.op = ReduceOp::kMax;
  TESSERA_RETURN_IF_ERROR(env.shm ? ShmDirectAllReduce(r, env) : TreeAllReduce(r, env));
  c.barrier_s = agreed[0];
  c.copy_s_per_byte = agreed[1];
  c.reduce_s_per_byte = agreed[2];
  c.p2p_latency_s = agreed[3];
  c.p2p_s_per_byte = agreed[4];
  c.measured = true;
  c.source = "measured now";
  return c;
}

}  // namespace tessera::comm::algo

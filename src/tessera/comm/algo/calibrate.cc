// Measures the cost model's constants with every rank of the communicator
// running at once (see cost_model.h).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

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

// Times `body` in `rounds` rounds of `per_round` calls (each round started
// together after a sync) and keeps the fastest round: robust to a rank being
// preempted by other work during one round. `spread` gets slowest/fastest.
template <typename Body>
StatusOr<double> Fastest(AlgoEnv& env, int rounds, int per_round, double* spread, Body&& body) {
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    TESSERA_RETURN_IF_ERROR(Sync(env));
    const double t0 = Now();
    for (int i = 0; i < per_round; ++i) TESSERA_RETURN_IF_ERROR(body());
    times.push_back((Now() - t0) / per_round);
  }
  std::sort(times.begin(), times.end());
  // Median over fastest: one interrupted round is normal, half of them is not.
  if (spread != nullptr) *spread = std::max(*spread, times[times.size() / 2] / std::max(times[0], 1e-12));
  return times[0];
}

StatusOr<CostConstants> MeasureConstants(AlgoEnv& env) {
  CostConstants c = DefaultConstants(env.transport->kind(), env.size);
  const int n = env.size;
  const size_t bytes = env.shm ? env.shm->window_bytes() : (1 << 20);
  uint8_t* a = env.scratch->Get(0, bytes);
  uint8_t* b = env.scratch->Get(1, bytes);
  std::memset(a, 1, bytes);
  std::memset(b, 2, bytes);
  double spread = 1;
  auto ok = [] { return Status::Ok(); };

  if (env.shm != nullptr) {
    for (int i = 0; i < 5; ++i) TESSERA_RETURN_IF_ERROR(Sync(env));
    TESSERA_ASSIGN_OR_RETURN(c.barrier_s, Fastest(env, 8, 50, &spread, [&] { return Sync(env); }));
    c.barrier_s = std::max(1e-8, c.barrier_s);
    TESSERA_ASSIGN_OR_RETURN(double copy_s, Fastest(env, 5, 1, nullptr, [&] {
                               std::memcpy(b, a, bytes);
                               return ok();
                             }));
    c.copy_s_per_byte = std::max(1e-13, copy_s / static_cast<double>(bytes));
    const void* srcs[2] = {a, b};
    TESSERA_ASSIGN_OR_RETURN(double reduce_s, Fastest(env, 5, 1, nullptr, [&] {
                               ReduceMany(b, srcs, 2, bytes / 2 / sizeof(float), DataType::kFloat32, ReduceOp::kSum, 0);
                               return ok();
                             }));
    c.reduce_s_per_byte = std::max(1e-13, reduce_s / static_cast<double>(bytes));
  }

  if (n > 1) {
    for (int i = 0; i < 3; ++i) TESSERA_RETURN_IF_ERROR(RingStep(env, a, b, 0));
    TESSERA_ASSIGN_OR_RETURN(c.p2p_latency_s, Fastest(env, 8, 20, &spread, [&] { return RingStep(env, a, b, 0); }));
    c.p2p_latency_s = std::max(1e-8, c.p2p_latency_s);
    const size_t big = std::min<size_t>(bytes, 1 << 20);
    TESSERA_ASSIGN_OR_RETURN(double step_s, Fastest(env, 4, 1, nullptr, [&] { return RingStep(env, a, b, big); }));
    c.p2p_s_per_byte = std::max(1e-13, (step_s - c.p2p_latency_s) / static_cast<double>(big));
  }

  // Agree: the maximum of every constant (and of the spread) over the ranks.
  double mine[6] = {c.barrier_s, c.copy_s_per_byte, c.reduce_s_per_byte, c.p2p_latency_s, c.p2p_s_per_byte, spread};
  double agreed[6];
  CollectiveArgs r;
  r.kind = CollectiveKind::kAllReduce;
  r.send = mine;
  r.recv = agreed;
  r.count = 6;
  r.dtype = DataType::kFloat64;
  r.op = ReduceOp::kMax;
  TESSERA_RETURN_IF_ERROR(env.shm ? ShmDirectAllReduce(r, env) : TreeAllReduce(r, env));
  c.barrier_s = agreed[0];
  c.copy_s_per_byte = agreed[1];
  c.reduce_s_per_byte = agreed[2];
  c.p2p_latency_s = agreed[3];
  c.p2p_s_per_byte = agreed[4];
  // Rounds that differ by more than 5x: other work competed for the cores.
  c.disturbed = agreed[5] > 5;
  c.measured = true;
  c.source = "measured now";
  return c;
}

}  // namespace tessera::comm::algo

// Causal flash attention (ops::CausalAttention / CausalAttentionBackward),
// fp32 and bf16, 1 and 2 threads, on GPT-like shapes: GFLOP/s of the
// forward and of the backward (counter "GFLOPs"; causal FLOPs: the forward
// 2 GEMMs of B·H·T²·Dh/2 multiply-adds each, the backward 5 of them). The
// kernels are written on the tile layer (docs/kernels.md); docs/perf.md
// compares this against the hand-written kernels they replaced (the same
// file built at the older commit).
//   build/bin/attention_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "tessera/ops/attention/attention.h"
#include "tessera/tensor/rng.h"

namespace {

using tessera::DType;
using tessera::Tensor;

struct Shape {
  int64_t b, h, t, dh;
};
const Shape kShapes[] = {{8, 4, 256, 32}, {4, 8, 512, 64}, {2, 8, 1024, 128}};

struct Inputs {
  Tensor q, k, v, dout;
  tessera::ops::AttentionResult fwd;
};

Inputs& Get(const Shape& s, DType dt) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, Inputs> cache;
  Inputs& in = cache[{s.b, s.h, s.t, s.dh, static_cast<int>(dt)}];
  if (!in.q.defined()) {
    for (auto [t, seed] : {std::pair{&in.q, 1}, {&in.k, 2}, {&in.v, 3}, {&in.dout, 4}}) {
      *t = Tensor::Empty({s.b, s.h, s.t, s.dh}, dt);
      tessera::FillUniform(*t, seed, -1, 1);
    }
    in.fwd = tessera::ops::CausalAttention(in.q, in.k, in.v, 1.0f / std::sqrt(static_cast<float>(s.dh)));
  }
  return in;
}

void Run(benchmark::State& state, const Shape& s, DType dt, bool backward, int threads) {
  Inputs& in = Get(s, dt);
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.dh));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) {
    if (backward) {
      benchmark::DoNotOptimize(
          tessera::ops::CausalAttentionBackward(in.dout, in.q, in.k, in.v, in.fwd, scale));
    } else {
      benchmark::DoNotOptimize(tessera::ops::CausalAttention(in.q, in.k, in.v, scale));
    }
  }
  omp_set_num_threads(saved);
  const double gemm_flops = 2.0 * s.b * s.h * s.t * s.t * s.dh / 2;  // one causal GEMM
  state.counters["GFLOPs"] = benchmark::Counter((backward ? 5 : 2) * gemm_flops * 1e-9 * state.iterations(),
                                                benchmark::Counter::kIsRate);
}

int Register() {
  for (const Shape& s : kShapes) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      for (bool bwd : {false, true}) {
        for (int threads : {1, 2}) {
          const std::string name = fmt::format("attention_{}/{}/b{}_h{}_t{}_dh{}/threads:{}", bwd ? "bwd" : "fwd",
                                               tessera::DTypeName(dt), s.b, s.h, s.t, s.dh, threads);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { Run(st, s, dt, bwd, threads); })
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace

BENCHMARK_MAIN();

// Throughput of the row-wise and element-wise operators on a GPT-shaped
// activation ([4096, 512], fp32 and bf16): softmax, layernorm, rmsnorm,
// gelu, swiglu, bias add, sum, dropout, forward and backward. Each row reports
// bytes moved per second (inputs read + outputs written, at the tensor dtype).
// "opt" rows run the optimized kernels on 1 and 2 threads, "ref" rows the
// scalar reference kernels (the oracle of the parity tests) on 1 thread, so
// one run prints the optimized/reference ratio. 1-thread rows use CPU time
// (robust on a shared machine), 2-thread rows wall time.
//   ./pointwise_bench --benchmark_filter='softmax' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <omp.h>

#include <functional>
#include <string>

#include "tessera/ops/activation/activation.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/dropout/dropout.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/norm/norm.h"
#include "tessera/ops/reduce/reduce.h"
#include "tessera/ops/softmax/softmax.h"
#include "tessera/tensor/rng.h"

namespace {

using tessera::DType;
using tessera::Tensor;
namespace ops = tessera::ops;

constexpr int64_t kRows = 4096, kCols = 512;

struct Inputs {
  Tensor x, dy, y_softmax, gamma, beta, bias;
  ops::NormResult ln, rms;

  explicit Inputs(DType dt) {
    x = Tensor::Empty({kRows, kCols}, dt);
    tessera::FillUniform(x, 1, -3, 3);
    dy = Tensor::Empty({kRows, kCols}, dt);
    tessera::FillUniform(dy, 2, -1, 1);
    gamma = Tensor::Full({kCols}, 1.0);
    beta = Tensor::Zeros({kCols});
    bias = Tensor::Empty({kCols}, dt);
    tessera::FillUniform(bias, 3, -1, 1);
    y_softmax = ops::Softmax(x);
    ln = ops::LayerNorm(x, gamma, beta);
    rms = ops::RmsNorm(x, gamma);
  }
};

Inputs& Get(DType dt) {
  static Inputs f32(DType::kF32), b16(DType::kBF16);
  return dt == DType::kF32 ? f32 : b16;
}

struct Op {
  const char* name;
  int tensors_moved;  // full-size tensors read + written
  std::function<void(Inputs&)> run;
};

const Op kOps[] = {
    {"softmax_fwd", 2, [](Inputs& in) { ops::Softmax(in.x); }},
    {"softmax_bwd", 3, [](Inputs& in) { ops::SoftmaxBackward(in.dy, in.y_softmax); }},
    {"layernorm_fwd", 2, [](Inputs& in) { ops::LayerNorm(in.x, in.gamma, in.beta); }},
    {"layernorm_bwd", 3, [](Inputs& in) { ops::LayerNormBackward(in.dy, in.x, in.gamma, in.ln); }},
    {"rmsnorm_fwd", 2, [](Inputs& in) { ops::RmsNorm(in.x, in.gamma); }},
    {"rmsnorm_bwd", 3, [](Inputs& in) { ops::RmsNormBackward(in.dy, in.x, in.gamma, in.rms); }},
    {"gelu_fwd", 2, [](Inputs& in) { ops::Gelu(in.x); }},
    {"gelu_bwd", 3, [](Inputs& in) { ops::GeluBackward(in.dy, in.x); }},
    {"swiglu_fwd", 3, [](Inputs& in) { ops::SwiGlu(in.x, in.dy); }},
    {"swiglu_bwd", 5, [](Inputs& in) { ops::SwiGluBackward(in.dy, in.x, in.dy); }},
    {"add_bias_fwd", 2, [](Inputs& in) { ops::Add(in.x, in.bias); }},
    {"add_bias_bwd", 2, [](Inputs& in) { ops::BinaryBackward(ops::BinaryOp::kAdd, in.dy, in.x, in.bias); }},
    {"mul_bwd", 5, [](Inputs& in) { ops::BinaryBackward(ops::BinaryOp::kMul, in.dy, in.x, in.dy); }},
    {"sum_rows", 1, [](Inputs& in) { ops::Sum(in.x, {1}); }},
    {"max_rows", 1, [](Inputs& in) { ops::Max(in.x, 1); }},
    {"dropout_fwd", 2, [](Inputs& in) { ops::Dropout(in.x, 0.1f, 7); }},
};

void Run(benchmark::State& state, const Op& op, DType dt, bool reference, int threads) {
  Inputs& in = Get(dt);
  ops::ScopedImpl impl(reference ? ops::Impl::kReference : ops::Impl::kOptimized);
  int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  for (auto _ : state) op.run(in);
  omp_set_num_threads(saved);
  const double bytes = static_cast<double>(op.tensors_moved) * kRows * kCols * tessera::DTypeSize(dt);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * static_cast<double>(state.iterations())));
}

int Register() {
  for (const Op& op : kOps) {
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const std::string base = fmt::format("{}/{}", op.name, tessera::DTypeName(dt));
      for (int threads : {1, 2}) {
        auto* b =
            benchmark::RegisterBenchmark(fmt::format("{}/opt/threads:{}", base, threads).c_str(),
                                         [&op, dt, threads](benchmark::State& s) { Run(s, op, dt, false, threads); });
        b->Unit(benchmark::kMicrosecond);
        if (threads > 1) b->UseRealTime();
      }
      benchmark::RegisterBenchmark(fmt::format("{}/ref/threads:1", base).c_str(),
                                   [&op, dt](benchmark::State& s) { Run(s, op, dt, true, 1); })
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(3);
    }
  }
  return 0;
}

const int kRegistered = Register();

}  // namespace

BENCHMARK_MAIN();

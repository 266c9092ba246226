// `tessera bench gemm|conv`: one kernel timed the way users compare BLAS
// libraries — buffers allocated and touched once, a warm-up call, then
// `--repeats` timed rounds (each long enough, >= --min-ms, to swamp the
// clock), the median round reported as `GFLOP/s: X` (plus min/max and the
// kernel or algorithm that ran). Threads: --threads (0 = all cores).
//   tessera bench gemm --m 4096 --n 4096 --k 4096 --dtype f32 --threads 2
//   tessera bench conv --n 8 --c 64 --h 56 --w 56 --k 64 --r 3 --pad 1 --algo winograd4x4
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/hal/threading.h"
#include "tessera/ops/conv/conv.h"
#include "tessera/ops/matmul/gemm.h"
#include "tessera/tensor/rng.h"
#include "tessera/tile/gemm.h"

namespace tessera::cli {
namespace {

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
};

// Seconds per call: `repeats` rounds of enough calls to last min_ms each.
Timing TimeCalls(const std::function<void()>& call, int repeats, double min_ms) {
  using Clock = std::chrono::steady_clock;
  call();  // warm-up: packing buffers, pages, caches
  auto t0 = Clock::now();
  call();
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int calls = std::max(1, static_cast<int>(min_ms / 1e3 / std::max(once, 1e-9)));
  std::vector<double> rounds;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    rounds.push_back(std::chrono::duration<double>(Clock::now() - start).count() / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  return {rounds[rounds.size() / 2], rounds.front(), rounds.back()};
}

void Report(const std::string& what, const std::string& kernel, double flops, const Timing& t) {
  std::printf("%s\nkernel: %s\nthreads: %d\ntime: %.3f ms (min %.3f, max %.3f)\nGFLOP/s: %.1f\n", what.c_str(),
              kernel.c_str(), hal::NumThreads(), t.median_s * 1e3, t.min_s * 1e3, t.max_s * 1e3,
              flops / t.median_s / 1e9);
}

struct Common {
  int threads = 0;
  int repeats = 7;
  double min_ms = 100;
};

void AddCommon(CLI::App* cmd, Common* c) {
  cmd->add_option("--threads", c->threads, "compute threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--repeats", c->repeats, "timed rounds (the median is reported)")->check(CLI::PositiveNumber);
  cmd->add_option("--min-ms", c->min_ms, "shortest timed round in milliseconds")->check(CLI::PositiveNumber);
}

void ApplyThreads(const Common& c) {
  if (c.threads > 0) hal::SetNumThreads(c.threads);
}

struct GemmArgs {
  Common common;
  int64_t m = 1024, n = 1024, k = 1024;
  std::string dtype = "f32";
  bool trans_a = false, trans_b = false;
};

// The tile configuration the GEMM runs with (tuned, cached or default).
template <typename TA, typename TB, typename TC>
std::string ChosenConfigName(const GemmArgs& a, const TA* x, int64_t lda, const TB* y, int64_t ldb, TC* c) {
  tile::GemmArgs<TA, TB, TC> g;
  g.trans_a = a.trans_a;
  g.trans_b = a.trans_b;
  g.m = a.m;
  g.n = a.n;
  g.k = a.k;
  g.a = x;
  g.lda = lda;
  g.b = y;
  g.ldb = ldb;
  g.c = c;
  g.ldc = a.n;
  return tile::ChosenConfig(g).ToString();
}

Status RunGemm(const GemmArgs& a) {
  ApplyThreads(a.common);
  if (a.m < 1 || a.n < 1 || a.k < 1) return InvalidArgument("bench gemm: --m, --n, --k must be >= 1");
  const int64_t lda = a.trans_a ? a.m : a.k, ldb = a.trans_b ? a.k : a.n;
  std::vector<float> c;
  std::vector<int32_t> ci;
  std::function<void()> call;
  std::vector<float> af, bf;
  std::vector<bf16> ah, bh;
  std::vector<uint8_t> au;
  std::vector<int8_t> bs;
  Tensor noise = Tensor::Empty({std::max(a.m, a.n) * a.k});
  FillUniform(noise, 1, -1.0f, 1.0f);
  const float* src = noise.data<float>();
  std::string config;
  if (a.dtype == "f32") {
    c.assign(static_cast<size_t>(a.m * a.n), 0.0f);
    af.assign(src, src + a.m * a.k);
    bf.assign(src, src + a.k * a.n);
    call = [&] { ops::GemmF32(a.trans_a, a.trans_b, a.m, a.n, a.k, 1.0f, af.data(), lda, bf.data(), ldb, 0.0f,
                              c.data(), a.n); };
    config = ChosenConfigName(a, af.data(), lda, bf.data(), ldb, c.data());
  } else if (a.dtype == "bf16") {
    c.assign(static_cast<size_t>(a.m * a.n), 0.0f);
    for (int64_t i = 0; i < a.m * a.k; ++i) ah.push_back(bf16(src[i]));
    for (int64_t i = 0; i < a.k * a.n; ++i) bh.push_back(bf16(src[i]));
    call = [&] { ops::GemmBF16F32(a.trans_a, a.trans_b, a.m, a.n, a.k, 1.0f, ah.data(), lda, bh.data(), ldb, 0.0f,
                                  c.data(), a.n); };
    config = ChosenConfigName(a, ah.data(), lda, bh.data(), ldb, c.data());
  } else if (a.dtype == "int8") {  // u8 x s8 -> s32
    ci.assign(static_cast<size_t>(a.m * a.n), 0);
    for (int64_t i = 0; i < a.m * a.k; ++i) au.push_back(static_cast<uint8_t>(127.5f * (src[i] + 1.0f)));
    for (int64_t i = 0; i < a.k * a.n; ++i) bs.push_back(static_cast<int8_t>(127.0f * src[i]));
    call = [&] { ops::GemmU8S8S32(a.trans_a, a.trans_b, a.m, a.n, a.k, au.data(), lda, bs.data(), ldb, false,
                                  ci.data(), a.n); };
    config = ChosenConfigName(a, au.data(), lda, bs.data(), ldb, ci.data());
  } else {
    return InvalidArgument("bench gemm: --dtype '{}' is not one of f32, bf16, int8", a.dtype);
  }
  Timing t = TimeCalls(call, a.common.repeats, a.common.min_ms);
  Report(fmt::format("gemm {} m={} n={} k={}{}{}", a.dtype, a.m, a.n, a.k, a.trans_a ? " A^T" : "",
                     a.trans_b ? " B^T" : ""),
         config, 2.0 * a.m * a.n * a.k, t);
  return Status::Ok();
}

struct ConvArgs {
  Common common;
  int64_t n = 8, c = 64, h = 56, w = 56, k = 64, r = 3, s = 0;
  int64_t stride = 1, pad = -1, dilation = 1, groups = 1;
  std::string layout = "NCHW", algo = "auto";
  bool backward = false;
};

Status RunConv(const ConvArgs& a) {
  ApplyThreads(a.common);
  ops::Conv2dOptions o;
  o.stride_h = o.stride_w = a.stride;
  const int64_t s = a.s > 0 ? a.s : a.r;
  o.pad_h = a.pad >= 0 ? a.pad : (a.r - 1) / 2;
  o.pad_w = a.pad >= 0 ? a.pad : (s - 1) / 2;
  o.dilation_h = o.dilation_w = a.dilation;
  o.groups = a.groups;
  if (a.layout != "NCHW" && a.layout != "NHWC") return InvalidArgument("bench conv: --layout NCHW | NHWC");
  o.layout = a.layout == "NCHW" ? ops::ImageLayout::kNCHW : ops::ImageLayout::kNHWC;
  bool found = false;
  for (auto algo : {ops::Conv2dAlgo::kAuto, ops::Conv2dAlgo::kDirect, ops::Conv2dAlgo::kIm2col,
                    ops::Conv2dAlgo::kGemm1x1, ops::Conv2dAlgo::kDepthwise, ops::Conv2dAlgo::kWinograd2x2,
                    ops::Conv2dAlgo::kWinograd4x4}) {
    if (a.algo == ops::Conv2dAlgoName(algo)) o.algo = algo, found = true;
  }
  if (!found) return InvalidArgument("bench conv: unknown --algo '{}'", a.algo);
  if (a.n < 1 || a.c < 1 || a.h < 1 || a.w < 1 || a.k < 1 || a.r < 1 || a.groups < 1) {
    return InvalidArgument("bench conv: --n, --c, --h, --w, --k, --r and --groups must be >= 1");
  }
  if (a.c % a.groups != 0) return InvalidArgument("bench conv: --groups {} does not divide --c {}", a.groups, a.c);
  Tensor x = o.layout == ops::ImageLayout::kNCHW ? Tensor::Empty({a.n, a.c, a.h, a.w}) : Tensor::Empty({a.n, a.h, a.w, a.c});
  Tensor w = Tensor::Empty({a.k, a.c / a.groups, a.r, s});
  FillUniform(x, 1, -1.0f, 1.0f);
  FillUniform(w, 2, -0.1f, 0.1f);
  const ops::Conv2dAlgo ran = o.algo == ops::Conv2dAlgo::kAuto ? ops::ChooseConv2dAlgo(x.shape(), w.shape(), o) : o.algo;
  Tensor y = ops::Conv2d(x, w, Tensor(), o);  // validates the shapes before timing
  const int64_t p = o.layout == ops::ImageLayout::kNCHW ? y.size(2) : y.size(1);
  const int64_t q = o.layout == ops::ImageLayout::kNCHW ? y.size(3) : y.size(2);
  double flops = 2.0 * a.n * p * q * a.k * (a.c / a.groups) * a.r * s;
  std::function<void()> call = [&] { y = ops::Conv2d(x, w, Tensor(), o); };
  const Tensor dy = y.Clone();
  if (a.backward) {
    call = [&] {
      y = ops::Conv2d(x, w, Tensor(), o);
      ops::Conv2dGrads g = ops::Conv2dBackward(dy, x, w, o, true, true, false);
    };
    flops *= 3;
  }
  Timing t = TimeCalls(call, a.common.repeats, a.common.min_ms);
  Report(fmt::format("conv{} {} n={} c={} h={} w={} k={} {}x{} stride {} pad {} dilation {} groups {}",
                     a.backward ? " forward+backward" : "", a.layout, a.n, a.c, a.h, a.w, a.k, a.r, s, a.stride,
                     o.pad_h, a.dilation, a.groups),
         ops::Conv2dAlgoName(ran), flops, t);
  return Status::Ok();
}

void RegisterBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Time one kernel (GEMM, convolution): GFLOP/s");
  bench->require_subcommand(1);
  auto g = std::make_shared<GemmArgs>();
  CLI::App* gemm = bench->add_subcommand("gemm", "C[m,n] = A[m,k] B[k,n] (row-major)");
  gemm->add_option("--m", g->m, "rows of C");
  gemm->add_option("--n", g->n, "columns of C");
  gemm->add_option("--k", g->k, "the reduction length");
  gemm->add_option("--dtype", g->dtype,
                   "f32 | bf16 (bf16 inputs, fp32 accumulation and output) | int8 (u8 x s8 -> s32)");
  gemm->add_flag("--trans-a", g->trans_a, "A stored [k, m]");
  gemm->add_flag("--trans-b", g->trans_b, "B stored [n, k]");
  AddCommon(gemm, &g->common);
  gemm->callback([g] { ExitWith(RunGemm(*g)); });
  auto c = std::make_shared<ConvArgs>();
  CLI::App* conv = bench->add_subcommand("conv", "2-d convolution (ops/conv/conv.h), fp32");
  conv->add_option("--n", c->n, "batch");
  conv->add_option("--c", c->c, "input channels");
  conv->add_option("--h", c->h, "input height");
  conv->add_option("--w", c->w, "input width");
  conv->add_option("--k", c->k, "output channels");
  conv->add_option("--r", c->r, "kernel height");
  conv->add_option("--s", c->s, "kernel width (0 = --r)");
  conv->add_option("--stride", c->stride, "stride");
  conv->add_option("--pad", c->pad, "padding (-1 = same for odd kernels)");
  conv->add_option("--dilation", c->dilation, "dilation");
  conv->add_option("--groups", c->groups, "groups (= c for depthwise)");
  conv->add_option("--layout", c->layout, "NCHW | NHWC");
  conv->add_option("--algo", c->algo, "auto | direct | im2col | gemm1x1 | depthwise | winograd2x2 | winograd4x4");
  conv->add_flag("--backward", c->backward, "time forward + both backward passes");
  AddCommon(conv, &c->common);
  conv->callback([c] { ExitWith(RunConv(*c)); });
}

}  // namespace

TESSERA_CLI_COMMAND(85, RegisterBenchCommand);

}  // namespace tessera::cli

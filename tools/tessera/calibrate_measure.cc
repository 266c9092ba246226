#include "calibrate_measure.h"
#include "calibrate_probes.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/threading.h"
#include "tessera/models/gpt.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/clip.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The upper median of `v` (non-empty).
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Seconds of one call of `fn`: the minimum of repeated calls for
// ~`budget_s` (>= 8 calls) after 2 warm-up calls. The machine is shared:
// other processes only ever add time, so the minimum is the machine's own cost.
template <typename F>
double TypicalSeconds(F&& fn, double budget_s) {
  fn();
  fn();
  std::vector<double> t;
  const auto start = Clock::now();
  while (t.size() < 8 || (Since(start) < budget_s && t.size() < 2000)) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(Since(t0));
  }
  return *std::min_element(t.begin(), t.end());
}

Tensor Filled(const Shape& shape, double value) { return Tensor::Full(shape, value, DType::kF32); }

Tensor Leaf(const Shape& shape, double value) {
  Tensor t = Filled(shape, value);
  t.set_requires_grad(true);
  return t;
}

// Every kernel thread writes its slice of a `bytes` buffer (allocated once
// per size): evicts what the caches held.
void WriteThrough(size_t bytes) {
  static std::map<size_t, std::vector<float>> buffers;
  std::vector<float>& buffer = buffers[bytes];
  if (buffer.empty()) buffer.assign(bytes / sizeof(float), 1.0f);
  const auto n = static_cast<int64_t>(buffer.size());
  float* b = buffer.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) b[i] += 1.0f;
}

// In a training step the saved activations, weights and gradients of a
// micro-batch do not fit in a core's L2, so each op reads its operands
// from the shared L3 or DRAM: evict the private caches (an 8 MiB write).
void EvictPrivateCaches() { WriteThrough(8u << 20); }
void EvictAllCaches() { WriteThrough(96u << 20); }

// Seconds of forward + backward (tape recorded, gradients into the leaves'
// .grad) of `forward` with cold private caches before each half: the
// minimum over repeats (>= 10, ~budget_s), the eviction not timed.
template <typename F>
double FwdBwdSeconds(F&& forward, double budget_s) {
  graph::GradModeGuard grad(true);
  Tensor probe = forward();
  graph::ClearTape();
  const Tensor ones = Tensor::Full(probe.shape(), 1.0, probe.dtype());
  double best = 1e30;
  const auto start = Clock::now();
  for (int i = 0; i < 10 || (Since(start) < budget_s && i < 2000); ++i) {
    EvictPrivateCaches();
    const auto t0 = Clock::now();
    Tensor y = forward();
    const auto t1 = Clock::now();
    EvictPrivateCaches();
    const auto t2 = Clock::now();
    graph::Backward(y, ones);
    const auto t3 = Clock::now();
    if (i >= 2) best = std::min(best, std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
  }
  return best;
}

std::vector<int64_t> Powers(int64_t from, int64_t to, int64_t factor) {
  std::vector<int64_t> v;
  for (int64_t x = from; x <= to; x *= factor) v.push_back(x);
  return v;
}

struct Sweep {
  std::vector<std::array<int64_t, 3>> linear;     // m, n, k
  std::vector<std::array<int64_t, 3>> attention;  // batch x heads, tokens, head width
  std::vector<int64_t> elements;                  // element-wise kinds' sizes
  std::vector<int64_t> widths;                    // cycled over the sizes (row widths)
  std::vector<int64_t> vocabs, experts;           // cross-entropy / router row widths, cycled
  double budget_s = 0.05;
};

// Powers of two over the ranges the planner may ask for, capped in work so
// one point takes at most ~20 ms.
Sweep MakeSweep(SweepSize size) {
  Sweep s;
  const bool tiny = size == SweepSize::kTiny;
  const double linear_cap = tiny ? 2e7 : 1.5e9;  // 6 m n k
  for (int64_t m : tiny ? std::vector<int64_t>{16, 256} : Powers(16, 4096, 4)) {
    for (int64_t n : tiny ? std::vector<int64_t>{32, 128} : Powers(32, 2048, 4)) {
      for (int64_t k : tiny ? std::vector<int64_t>{32, 128} : Powers(32, 2048, 4)) {
        if (6.0 * m * n * k <= linear_cap) s.linear.push_back({m, n, k});
      }
    }
  }
  const double attention_cap = tiny ? 2e6 : 4e8;  // 12 bh t^2 dh
  for (int64_t t : tiny ? std::vector<int64_t>{16, 64} : Powers(16, 512, 2)) {
    for (int64_t dh : tiny ? std::vector<int64_t>{16, 32} : Powers(16, 128, 2)) {
      for (int64_t bh : {2, 16}) {
        if (12.0 * bh * t * t * dh <= attention_cap) s.attention.push_back({bh, t, dh});
      }
    }
  }
  s.elements = tiny ? std::vector<int64_t>{1 << 10, 1 << 14} : Powers(1 << 9, 1 << 21, 4);
  s.widths = tiny ? std::vector<int64_t>{32, 128} : Powers(32, 1024, 2);
  s.vocabs = tiny ? std::vector<int64_t>{16} : Powers(16, 1024, 4);
  s.experts = tiny ? std::vector<int64_t>{4} : Powers(2, 64, 2);
  s.budget_s = tiny ? 0.005 : 0.05;
  return s;
}

// The worst fit so far: its rms relative error and what it fitted.
struct WorstFit {
  double rms = 0;
  std::string what;
  void Add(double r, const std::string& name) {
    if (r > rms) {
      rms = r;
      what = name;
    }
  }
};

// One element-wise kind: forward + backward at every sweep size (rows x
// width, the width cycling), interpolated; the line is reported.
template <typename F>
StatusOr<sim::OpLine> SweepKind(sim::OpKind kind, const std::vector<int64_t>& sizes,
                                const std::vector<int64_t>& widths, double budget, WorstFit& worst,
                                std::vector<std::string>* report, F&& time_at /* (rows, width) -> s */) {
  std::vector<double> xs, ts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t width = widths[i % widths.size()];
    const int64_t rows = std::max<int64_t>(1, sizes[i] / width);
    xs.push_back(static_cast<double>(rows * width));
    ts.push_back(time_at(rows, width, budget));
  }
  // Sizes can repeat after rounding to whole rows: keep x increasing.
  sim::OpLine line;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (line.points.empty() || xs[i] > line.points.back().first) line.points.emplace_back(xs[i], ts[i]);
  }
  auto fit = sim::FitLineRelative(xs, ts);
  if (!fit.ok()) return Internal("op kind {}: {}", sim::OpKindName(kind), fit.status().ToString());
  line.fixed_s = std::max(0.0, fit->intercept);
  line.per_unit_s = std::max(0.0, fit->slope);
  for (size_t i = 0; i + 1 < ts.size(); ++i) {
    if (ts[i + 1] < 0.7 * ts[i]) worst.Add(ts[i] / ts[i + 1] - 1, std::string(sim::OpKindName(kind)) + " (time falls with size)");
  }
  if (report) {
    report->push_back(fmt::format("{}: {} sizes {}-{} elements, line rms error {:.1f} % (the points are used)",
                                  sim::OpKindName(kind), xs.size(), xs.front(), xs.back(),
                                  100 * fit->rms_rel_error));
  }
  return line;
}

StatusOr<WorstFit> MeasureOps(sim::HostCalibration& h, const Sweep& sw, std::vector<std::string>* report) {
  WorstFit worst;
  const double budget = sw.budget_s;
  std::vector<sim::LinearSample> linear;
  for (const auto& [m, n, k] : sw.linear) {
    Tensor x = Leaf({m, k}, 0.5), w = Leaf({n, k}, 0.25);
    const double s = FwdBwdSeconds([&] { return graph::MatMul(x, w, false, true); }, budget);
    linear.push_back({static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), s});
  }
  TESSERA_ASSIGN_OR_RETURN(h.linear, sim::FitLinearCost(linear, h.peak_flops));
  worst.Add(h.linear.rms_rel_error, "linear");
  std::vector<sim::AttentionSample> attention;
  for (const auto& [bh, t, dh] : sw.attention) {
    Tensor q = Leaf({1, bh, t, dh}, 0.1), k = Leaf({1, bh, t, dh}, 0.2), v = Leaf({1, bh, t, dh}, 0.3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
    const double s =
        FwdBwdSeconds([&] { return graph::CausalAttention(q, k, v, static_cast<float>(scale)); }, budget);
    attention.push_back({static_cast<double>(bh), static_cast<double>(t), static_cast<double>(dh), s});
  }
  TESSERA_ASSIGN_OR_RETURN(h.attention, sim::FitAttentionCost(attention));
  worst.Add(h.attention.rms_rel_error, "attention");
  if (report) {
    report->push_back(fmt::format("linear: {} shapes (m 16-4096, n, k 32-2048), rms error {:.1f} %: max efficiency "
                                  "{:.3f}, half m/n/k {}/{}/{}, fixed {:.2f} us",
                                  linear.size(), 100 * h.linear.rms_rel_error, h.linear.max_efficiency,
                                  h.linear.half_m, h.linear.half_n, h.linear.half_k, h.linear.fixed_s * 1e6));
    report->push_back(fmt::format("attention: {} shapes (tokens 16-512, head width 16-128), rms error {:.1f} %",
                                  attention.size(), 100 * h.attention.rms_rel_error));
  }
  auto set = [&](sim::OpKind kind, StatusOr<sim::OpLine> line) -> Status {
    if (!line.ok()) return line.status();
    h.ops[static_cast<int>(kind)] = *std::move(line);
    return Status::Ok();
  };
  const auto& el = sw.elements;
  const auto& wd = sw.widths;
  // Rope and the head-major copies work on [1, heads, tokens, head width].
  auto heads_of = [](int64_t width) { return std::max<int64_t>(1, width / 32); };
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kNorm, SweepKind(sim::OpKind::kNorm, el, wd, budget, worst, report,
                                                               [](int64_t rows, int64_t width, double b) {
    Tensor x = Leaf({rows, width}, 0.5), g = Leaf({width}, 1.0);
    return FwdBwdSeconds([&] { return graph::RmsNorm(x, g); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kPointwise, SweepKind(sim::OpKind::kPointwise, el, wd, budget, worst,
                                                                    report, [](int64_t rows, int64_t width, double b) {
    Tensor a = Leaf({rows, width}, 0.5), c = Leaf({rows, width}, 1.5);
    return FwdBwdSeconds([&] { return graph::Mul(a, c); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kActivation, SweepKind(sim::OpKind::kActivation, el, wd, budget, worst,
                                                                     report, [](int64_t rows, int64_t width, double b) {
    Tensor a = Leaf({rows, width}, 0.5), c = Leaf({rows, width}, 1.5);
    return FwdBwdSeconds([&] { return graph::SwiGlu(a, c); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kRope, SweepKind(sim::OpKind::kRope, el, wd, budget, worst, report,
                                                               [&](int64_t rows, int64_t width, double b) {
    const int64_t heads = heads_of(width);
    Tensor q = Leaf({1, heads, rows, width / heads}, 0.1);
    return FwdBwdSeconds([&] { return graph::Rope(q); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kCopy, SweepKind(sim::OpKind::kCopy, el, wd, budget, worst, report,
                                                               [&](int64_t rows, int64_t width, double b) {
    const int64_t heads = heads_of(width);
    Tensor q = Leaf({1, rows, heads, width / heads}, 0.1);
    return FwdBwdSeconds([&] { return graph::Contiguous(graph::Transpose(q, 1, 2)); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kCrossEntropy,
                              SweepKind(sim::OpKind::kCrossEntropy, el, sw.vocabs, budget, worst, report,
                                        [](int64_t rows, int64_t vocab, double b) {
    Tensor logits = Leaf({rows, vocab}, 0.1);
    Tensor targets = Tensor::Zeros({rows}, DType::kI64);
    return FwdBwdSeconds([&] { return graph::CrossEntropy(logits, targets); }, b);
  })));
  std::vector<int64_t> router_sizes;
  for (int64_t e : el) router_sizes.push_back(std::max<int64_t>(64, e / 16));  // tokens x experts is small
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kSoftmax, SweepKind(sim::OpKind::kSoftmax, router_sizes, sw.experts,
                                                                  budget, worst, report,
                                                                  [](int64_t rows, int64_t experts, double b) {
    Tensor x = Leaf({rows, experts}, 0.1);
    return FwdBwdSeconds([&] { return graph::Softmax(x, -1); }, b);
  })));
  TESSERA_RETURN_IF_ERROR(set(sim::OpKind::kRows, SweepKind(sim::OpKind::kRows, el, wd, budget, worst, report,
                                                               [](int64_t rows, int64_t width, double b) {
    Tensor x = Leaf({rows, width}, 0.5);
    std::vector<int64_t> idx(static_cast<size_t>(rows));
    for (size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<int64_t>(idx.size() - 1 - j);
    Tensor ids = Tensor::FromInts(idx, {rows});
    return FwdBwdSeconds([&] { return graph::GatherRows(x, ids); }, b);
  })));
  return worst;
}

// Peak, bandwidth, forward-only GEMM curve (recorded), element-wise kernel
// cost, autograd overhead.
StatusOr<sim::HostCalibration> MeasureHost(int threads, const hal::PeakInfo& peak, const Sweep& sw) {
  hal::SetNumThreads(threads);
  sim::HostCalibration h;
  h.threads = threads;
  const bool all = threads == peak.threads;
  h.peak_flops = all ? peak.fp32_flops : peak.fp32_flops_per_core * threads;
  h.triad_bytes_per_s = all ? peak.triad_bytes_per_s : peak.triad_bytes_per_s_per_core * threads;
  graph::NoGradGuard no_grad;
  std::vector<sim::GemmSample> gemms;
  for (const auto& [m, n, k] : sw.linear) {
    Tensor a = Filled({m, k}, 0.5), b = Filled({k, n}, 0.25);
    gemms.push_back({m, n, k, TypicalSeconds([&] { Tensor c = ops::MatMul(a, b); }, sw.budget_s)});
  }
  TESSERA_ASSIGN_OR_RETURN(sim::CurveFit curve, sim::FitEfficiencyCurve(gemms, h.peak_flops));
  h.gemm = curve.curve;
  h.gemm_rms_rel_error = curve.rms_rel_error;
  // Element-wise: c = a + b over the sweep's sizes, 12 bytes per element.
  std::vector<double> bytes, secs;
  for (int64_t e : sw.elements) {
    Tensor a = Filled({e}, 1.0), b = Filled({e}, 2.0);
    secs.push_back(TypicalSeconds([&] { Tensor c = ops::Add(a, b); }, sw.budget_s));
    bytes.push_back(12.0 * static_cast<double>(e));
  }
  TESSERA_ASSIGN_OR_RETURN(sim::LineFit ew, sim::FitLineRelative(bytes, secs));
  if (!(ew.slope > 0)) return Internal("element-wise time does not grow with size (slope {})", ew.slope);
  h.kernel_overhead_s = std::max(0.0, ew.intercept);
  h.elementwise_bytes_per_s = 1.0 / ew.slope;
  // Autograd: forward + tape + backward of a chain of tiny multiplies.
  constexpr int kChain = 64;
  Tensor x = Filled({1, 8}, 1.0);
  x.set_requires_grad(true);
  const double chain = TypicalSeconds(
      [&] {
        graph::GradModeGuard grad(true);
        Tensor y = x;
        for (int i = 0; i < kChain; ++i) y = graph::Mul(y, x);
        graph::Backward(graph::Sum(y));
        x.set_grad(Tensor());
      },
      sw.budget_s * 4);
  h.autograd_op_s = chain / kChain;
  return h;
}

// Gradient-norm clipping + AdamW step over `tensors` tensors of `elements`
// each, caches cold (a step's activations pass between two optimizer steps).
double OptimizerSeconds(int tensors, int64_t elements, double budget_s) {
  std::vector<graph::NamedTensor> params;
  std::vector<Tensor> all;
  for (int i = 0; i < tensors; ++i) {
    Tensor p = Leaf({elements}, 0.01);
    p.set_grad(Filled({elements}, 1e-3));
    params.emplace_back(fmt::format("p{}", i), p);
    all.push_back(p);
  }
  optim::AdamW adam(params, optim::AdamWOptions{});
  double best = 1e30;
  const auto start = Clock::now();
  for (int i = 0; i < 10 || (Since(start) < budget_s && i < 200); ++i) {
    EvictAllCaches();
    const auto t0 = Clock::now();
    optim::ClipGradNorm(all, 1.0);
    adam.Step(1e-4);
    if (i >= 2) best = std::min(best, Since(t0));
  }
  return best;
}

// Per tensor from 64 tiny tensors, per parameter from 32 tensors of 32 Ki.
void MeasureOptimizer(sim::HostCalibration& h, SweepSize size) {
  const double budget = size == SweepSize::kTiny ? 0.01 : 0.3;
  const int64_t big = size == SweepSize::kTiny ? 4096 : 32768;
  const double tiny = OptimizerSeconds(64, 16, budget) / 64;
  h.optimizer_per_tensor_s = tiny;
  h.optimizer_per_param_s = std::max(0.0, OptimizerSeconds(32, big, budget) - 32 * tiny) / (32.0 * big);
}

// Single-threaded Linear forward + backward (256 x 512 x 128): a neighbour
// rank's load during the op sweeps.
std::function<void()> LinearLoad() {
  auto x = std::make_shared<Tensor>(Leaf({256, 128}, 0.5)), w = std::make_shared<Tensor>(Leaf({512, 128}, 0.1));
  return [x, w] {
    graph::GradModeGuard grad(true);
    graph::Backward(graph::MatMul(*x, *w, false, true));
  };
}

}  // namespace

StatusOr<sim::HostCalibration> MeasureHostCalibration(int threads, int cores, const hal::PeakInfo& peak,
                                                      SweepSize size, std::vector<std::string>* report) {
  const Sweep sweep = MakeSweep(size);
  const int neighbour_count = threads == 1 ? cores - 1 : 0;
  hal::SetNumThreads(threads);
  // The context probes: each probe model's step (neighbours running probes
  // of their own) before and after the op sweeps; factor = median step /
  // op-sum, averaged over the probes.
  struct Probe {
    std::vector<std::unique_ptr<ProbeRank>> ranks;  // [0] measured, others neighbours
    std::vector<double> samples;
  };
  std::vector<Probe> probes;
  for (const models::GptConfig& config : ProbeModelConfigs()) {
    Probe p;
    for (int i = 0; i <= neighbour_count; ++i) {
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ProbeRank> rank, ProbeRank::Create(config, 4, 1 + i));
      p.ranks.push_back(std::move(rank));
    }
    probes.push_back(std::move(p));
  }
  const double probe_s = size == SweepSize::kTiny ? 0.02 : 0.4;
  auto sample = [&] {
    for (Probe& p : probes) {
      size_t next = 1;
      BusyNeighbours busy(neighbour_count, [&] {
        ProbeRank* mine = p.ranks[next++].get();
        return std::function<void()>([mine] { mine->Step(); });
      });
      ProbeRank& probe = *p.ranks[0];
      probe.Step();
      probe.Step();
      const auto start = Clock::now();
      for (int i = 0; i < 4 || (Since(start) < probe_s && i < 200); ++i) p.samples.push_back(probe.Step());
    }
  };
  sample();
  auto neighbours = std::make_unique<BusyNeighbours>(neighbour_count, LinearLoad);
  sim::HostCalibration best;
  double best_worst = 0;
  std::vector<std::string> best_report;
  for (int attempt = 0; attempt < (size == SweepSize::kTiny ? 1 : 3); ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(sim::HostCalibration h, MeasureHost(threads, peak, sweep));
    std::vector<std::string> lines;
    TESSERA_ASSIGN_OR_RETURN(WorstFit worst, MeasureOps(h, sweep, &lines));
    MeasureOptimizer(h, size);
    if (attempt == 0 || worst.rms < best_worst) {
      best = h;
      best_worst = worst.rms;
      best_report = lines;
    }
    if (best_worst <= 0.25) break;
    TLOG(WARN, "calibrate: {} thread(s): {} off by {:.0f} % (machine busy?); measuring again", threads,
         worst.what, 100 * worst.rms);
  }
  neighbours.reset();
  sample();
  std::vector<double> factors;
  for (Probe& p : probes) {
    sim::HostCalibration isolated = best;
    isolated.context_factor = 1;
    const ProbeRank& r = *p.ranks[0];
    const double op_sum = sim::OpSumSecondsPerMicroBatch(isolated, TwinModelOf(r.config()), r.micro_batch());
    const double median = Median(p.samples);
    factors.push_back(median / op_sum);
    best_report.push_back(fmt::format("context probe d{} {}: median {:.3f} ms per micro-batch over {} steps, "
                                      "op-sum {:.3f} ms, factor {:.3f}",
                                      r.config().d_model, r.config().moe.num_experts > 0 ? "MoE" : "dense",
                                      1e3 * median, p.samples.size(), 1e3 * op_sum, median / op_sum));
  }
  double sum = 0;
  for (double f : factors) sum += f;
  best.context_factor = sum / static_cast<double>(factors.size());
  if (report) {
    for (const std::string& line : best_report) report->push_back(fmt::format("{} thread(s): {}", threads, line));
  }
  return best;
}

}  // namespace tessera::cli


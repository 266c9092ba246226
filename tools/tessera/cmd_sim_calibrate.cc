// `tessera sim calibrate [--out FILE] [--ranks N] [--ccl-perf FILE] [--json]`:
// measures this machine (fp32 peak and STREAM triad from `tessera info`'s
// cache, GEMMs at several shapes, every autograd op kind of a small
// transformer, the optimizer, a probe model's real training steps (the
// context factor), a 2-process meeting probe, and a 2-rank all-reduce sweep
// run as `tessera launch --nproc 2 -- tessera ccl-perf allreduce`, or read
// from --ccl-perf FILE), fits the twin constants (sim/calibrate.h) and
// writes the cluster spec FILE (N ranks sharing the cores) and FILE's
// .twin.toml. Micro-benchmark timings are minima of repeated runs (a host
// whose fits are poor is measured again, up to 3 times); the probes report
// medians. Takes ~15 s.
// `tessera sim predict --cluster FILE CONFIG [--set k=v ...] [--json]`:
// the twin's step time for a `tessera train` config (sim/twin.h).
// `tessera sim meeting-probe` (under `tessera launch`, run by calibrate):
// what each meeting of ranks amid compute costs.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "commands.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/hal/topology.h"
#include "tessera/models/gpt.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/optim/adamw.h"
#include "tessera/optim/clip.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/twin.h"
#include "tessera/train/train_config.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of one call of `fn`: the minimum of repeated calls for
// ~`budget_s` (>= 8 calls) after 2 warm-up calls. The machine is shared:
// other processes only ever add time (a descheduled OpenMP thread stalls a
// 2-thread kernel for a whole time slice), so the minimum is the machine's
// own cost.
template <typename F>
double TypicalSeconds(F&& fn, double budget_s) {
  fn();
  fn();
  std::vector<double> t;
  const auto start = Clock::now();
  while (t.size() < 8 || (std::chrono::duration<double>(Clock::now() - start).count() < budget_s && t.size() < 2000)) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return *std::min_element(t.begin(), t.end());
}

// The upper median of `v` (non-empty).
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

Tensor Filled(const Shape& shape, double value) { return Tensor::Full(shape, value, DType::kF32); }

// GEMM shapes (M, N, K): square sizes and the token-by-feature shapes of
// small transformers.
constexpr std::array<std::array<int64_t, 3>, 10> kGemmShapes = {{{32, 32, 32},
                                                                 {64, 64, 64},
                                                                 {128, 128, 128},
                                                                 {256, 256, 256},
                                                                 {512, 512, 512},
                                                                 {160, 128, 128},
                                                                 {160, 384, 128},
                                                                 {640, 128, 384},
                                                                 {1280, 128, 128},
                                                                 {1024, 1024, 256}}};

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

// Evicts the cores' private caches (an 8 MiB write). In a training step
// the saved activations, weights and gradients of a micro-batch (MBs) do
// not fit in a core's L2, so each op reads its operands from the shared L3
// or DRAM.
void EvictPrivateCaches() { WriteThrough(8u << 20); }

// Evicts the last-level cache too (a 96 MiB write).
void EvictAllCaches() { WriteThrough(96u << 20); }

// Seconds of forward + backward (tape recorded, gradients into the leaves'
// .grad) of `forward` with cold private caches before each half: the
// minimum over repeats (>= 8, ~budget_s), the eviction not timed.
template <typename F>
double FwdBwdSeconds(F&& forward, double budget_s) {
  graph::GradModeGuard grad(true);
  Tensor probe = forward();
  graph::ClearTape();
  const Tensor ones = Tensor::Full(probe.shape(), 1.0, probe.dtype());
  double best = 1e30;
  const auto start = Clock::now();
  for (int i = 0; i < 10 || (std::chrono::duration<double>(Clock::now() - start).count() < budget_s && i < 2000);
       ++i) {
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

Tensor Leaf(const Shape& shape, double value) {
  Tensor t = Filled(shape, value);
  t.set_requires_grad(true);
  return t;
}

// Fits one op kind from forward + backward timings at sizes `xs` (the
// kind's units); `time_at(i)` measures size i.
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

template <typename F>
StatusOr<sim::OpLine> FitKind(sim::OpKind kind, const std::vector<double>& xs, WorstFit& worst, F&& time_at) {
  std::vector<double> ts;
  for (size_t i = 0; i < xs.size(); ++i) ts.push_back(time_at(i));
  auto fit = sim::FitLineRelative(xs, ts);
  if (!fit.ok()) return Internal("op kind {}: {}", sim::OpKindName(kind), fit.status().ToString());
  // The points are used as measured (interpolated); a time that falls
  // markedly with size means another process disturbed a point.
  for (size_t i = 0; i + 1 < ts.size(); ++i) {
    if (ts[i + 1] < 0.7 * ts[i]) worst.Add(ts[i] / ts[i + 1] - 1, std::string(sim::OpKindName(kind)) + " (time falls with size)");
  }
  sim::OpLine line{std::max(0.0, fit->intercept), std::max(0.0, fit->slope), {}};
  for (size_t i = 0; i < xs.size(); ++i) line.points.emplace_back(xs[i], ts[i]);
  return line;
}

// Returns the worst fit.
StatusOr<WorstFit> MeasureOps(sim::HostCalibration& h) {
  WorstFit worst;
  constexpr double kBudget = 0.08;
  const std::vector<int64_t> rows = {40, 160, 640, 2560};
  std::vector<double> el;
  for (int64_t r : rows) el.push_back(static_cast<double>(r) * 128);
  auto set = [&](sim::OpKind k, const sim::OpLine& l) { h.ops[static_cast<int>(k)] = l; };
  std::vector<sim::GemmSample> linear;
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {40, 128, 128}, {160, 128, 128}, {160, 384, 128}, {160, 128, 384}, {640, 256, 128}, {1280, 128, 384}}) {
    Tensor x = Leaf({m, k}, 0.5), w = Leaf({n, k}, 0.25);
    const double s = FwdBwdSeconds([&] { return graph::MatMul(x, w, false, true); }, kBudget);
    linear.push_back({3 * m, n, k, s});  // 3 GEMMs of 2 m n k
  }
  TESSERA_ASSIGN_OR_RETURN(sim::CurveFit lin, sim::FitEfficiencyCurve(linear, h.peak_flops));
  h.linear = lin.curve;
  h.linear_rms_rel_error = lin.rms_rel_error;
  const std::vector<int64_t> batches = {1, 4, 16, 64};  // sequences of 40 tokens, 4 heads of 32
  std::vector<double> attn_flops, head_el;
  for (int64_t b : batches) {
    attn_flops.push_back(12.0 * static_cast<double>(b) * 4 * 40 * 40 * 32);
    head_el.push_back(static_cast<double>(b) * 40 * 128);
  }
  TESSERA_ASSIGN_OR_RETURN(auto attn, FitKind(sim::OpKind::kAttention, attn_flops, worst, [&](size_t i) {
                             Tensor q = Leaf({batches[i], 4, 40, 32}, 0.1), k = Leaf({batches[i], 4, 40, 32}, 0.2),
                                    v = Leaf({batches[i], 4, 40, 32}, 0.3);
                             return FwdBwdSeconds([&] { return graph::CausalAttention(q, k, v, 0.17f); }, kBudget);
                           }));
  set(sim::OpKind::kAttention, attn);
  TESSERA_ASSIGN_OR_RETURN(auto rope, FitKind(sim::OpKind::kRope, head_el, worst, [&](size_t i) {
                             Tensor q = Leaf({batches[i], 4, 40, 32}, 0.1);
                             return FwdBwdSeconds([&] { return graph::Rope(q); }, kBudget);
                           }));
  set(sim::OpKind::kRope, rope);
  TESSERA_ASSIGN_OR_RETURN(auto copy, FitKind(sim::OpKind::kCopy, head_el, worst, [&](size_t i) {
                             Tensor q = Leaf({batches[i], 40, 4, 32}, 0.1);
                             return FwdBwdSeconds([&] { return graph::Contiguous(graph::Transpose(q, 1, 2)); },
                                                  kBudget);
                           }));
  set(sim::OpKind::kCopy, copy);
  TESSERA_ASSIGN_OR_RETURN(auto norm, FitKind(sim::OpKind::kNorm, el, worst, [&](size_t i) {
                             Tensor x = Leaf({rows[i], 128}, 0.5), g = Leaf({128}, 1.0);
                             return FwdBwdSeconds([&] { return graph::RmsNorm(x, g); }, kBudget);
                           }));
  set(sim::OpKind::kNorm, norm);
  TESSERA_ASSIGN_OR_RETURN(auto pw, FitKind(sim::OpKind::kPointwise, el, worst, [&](size_t i) {
                             Tensor a = Leaf({rows[i], 128}, 0.5), b = Leaf({rows[i], 128}, 1.5);
                             return FwdBwdSeconds([&] { return graph::Mul(a, b); }, kBudget);
                           }));
  set(sim::OpKind::kPointwise, pw);
  TESSERA_ASSIGN_OR_RETURN(auto act, FitKind(sim::OpKind::kActivation, el, worst, [&](size_t i) {
                             Tensor a = Leaf({rows[i], 128}, 0.5), b = Leaf({rows[i], 128}, 1.5);
                             return FwdBwdSeconds([&] { return graph::SwiGlu(a, b); }, kBudget);
                           }));
  set(sim::OpKind::kActivation, act);
  std::vector<double> logits_el;
  for (int64_t r : rows) logits_el.push_back(static_cast<double>(r) * 16);
  TESSERA_ASSIGN_OR_RETURN(auto ce, FitKind(sim::OpKind::kCrossEntropy, logits_el, worst, [&](size_t i) {
                             Tensor logits = Leaf({rows[i], 16}, 0.1);
                             Tensor targets = Tensor::Zeros({rows[i]}, DType::kI64);
                             return FwdBwdSeconds([&] { return graph::CrossEntropy(logits, targets); }, kBudget);
                           }));
  set(sim::OpKind::kCrossEntropy, ce);
  std::vector<double> router_el;
  for (int64_t r : rows) router_el.push_back(static_cast<double>(r) * 4);
  TESSERA_ASSIGN_OR_RETURN(auto sm, FitKind(sim::OpKind::kSoftmax, router_el, worst, [&](size_t i) {
                             Tensor x = Leaf({rows[i], 4}, 0.1);
                             return FwdBwdSeconds([&] { return graph::Softmax(x, -1); }, kBudget);
                           }));
  set(sim::OpKind::kSoftmax, sm);
  TESSERA_ASSIGN_OR_RETURN(auto gather, FitKind(sim::OpKind::kRows, el, worst, [&](size_t i) {
                             Tensor x = Leaf({rows[i], 128}, 0.5);
                             std::vector<int64_t> idx(static_cast<size_t>(rows[i]));
                             for (size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<int64_t>(idx.size() - 1 - j);
                             Tensor ids = Tensor::FromInts(idx, {rows[i]});
                             return FwdBwdSeconds([&] { return graph::GatherRows(x, ids); }, kBudget);
                           }));
  set(sim::OpKind::kRows, gather);
  worst.Add(h.linear_rms_rel_error, "linear");
  return worst;
}

StatusOr<sim::HostCalibration> MeasureHost(int threads, const hal::PeakInfo& peak) {
  hal::SetNumThreads(threads);
  sim::HostCalibration h;
  h.threads = threads;
  const bool all = threads == peak.threads;
  h.peak_flops = all ? peak.fp32_flops : peak.fp32_flops_per_core * threads;
  h.triad_bytes_per_s = all ? peak.triad_bytes_per_s : peak.triad_bytes_per_s_per_core * threads;
  graph::NoGradGuard no_grad;
  std::vector<sim::GemmSample> gemms;
  for (const auto& [m, n, k] : kGemmShapes) {
    Tensor a = Filled({m, k}, 0.5), b = Filled({k, n}, 0.25);
    const double s = TypicalSeconds([&] { Tensor c = ops::MatMul(a, b); }, 0.25);
    gemms.push_back({m, n, k, s});
  }
  TESSERA_ASSIGN_OR_RETURN(sim::CurveFit curve, sim::FitEfficiencyCurve(gemms, h.peak_flops));
  h.gemm = curve.curve;
  h.gemm_rms_rel_error = curve.rms_rel_error;
  // Element-wise: c = a + b over [rows, 128] fp32, 12 bytes per element.
  std::vector<double> bytes, secs;
  for (int64_t rows : {1, 8, 64, 160, 640, 1280, 2560}) {
    Tensor a = Filled({rows, 128}, 1.0), b = Filled({rows, 128}, 2.0);
    secs.push_back(TypicalSeconds([&] { Tensor c = ops::Add(a, b); }, 0.15));
    bytes.push_back(12.0 * static_cast<double>(rows) * 128);
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
      0.3);
  h.autograd_op_s = chain / kChain;
  return h;
}

// Gradient-norm clipping + AdamW step over `tensors` parameter tensors of
// `elements` each (gradients set).
double OptimizerSeconds(int tensors, int64_t elements) {
  std::vector<graph::NamedTensor> params;
  std::vector<Tensor> all;
  for (int i = 0; i < tensors; ++i) {
    Tensor p = Leaf({elements}, 0.01);
    p.set_grad(Filled({elements}, 1e-3));
    params.emplace_back(fmt::format("p{}", i), p);
    all.push_back(p);
  }
  optim::AdamW adam(params, optim::AdamWOptions{});
  // In a step the micro-batches' activations pass through the caches
  // between two optimizer steps: time it with cold caches.
  double best = 1e30;
  const auto start = Clock::now();
  for (int i = 0; i < 10 || (std::chrono::duration<double>(Clock::now() - start).count() < 0.3 && i < 200); ++i) {
    EvictAllCaches();
    const auto t0 = Clock::now();
    optim::ClipGradNorm(all, 1.0);
    adam.Step(1e-4);
    if (i >= 2) best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// Per tensor from 64 tiny tensors, per parameter from 32 x 32 Ki (the
// size of a small transformer's weights).
void MeasureOptimizer(sim::HostCalibration& h) {
  const double tiny = OptimizerSeconds(64, 16) / 64;
  const double big = OptimizerSeconds(32, 32768);
  h.optimizer_per_tensor_s = tiny;
  h.optimizer_per_param_s = std::max(0.0, big - 32 * tiny) / (32.0 * 32768);
}

// While alive, `count` neighbour threads with 1 kernel thread each run a
// workload back to back (each its own, from `make`): the other ranks of a
// multi-rank job keep their cores busy, competing for the shared cache,
// memory and (if the cores are SMT siblings) execution units.
class BusyNeighbours {
 public:
  BusyNeighbours(int count, const std::function<std::function<void()>()>& make) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this, work = make()] {
        hal::SetNumThreads(1);
        while (!stop_.load(std::memory_order_relaxed)) work();
      });
    }
  }
  ~BusyNeighbours() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// Single-threaded Linear forward + backward (160 x 384 x 128): a neighbour
// rank's load during the op micro-benchmarks.
std::function<void()> LinearLoad() {
  auto x = std::make_shared<Tensor>(Leaf({160, 128}, 0.5)), w = std::make_shared<Tensor>(Leaf({384, 128}, 0.1));
  return [x, w] {
    graph::GradModeGuard grad(true);
    graph::Backward(graph::MatMul(*x, *w, false, true));
  };
}

// The context probe: a small MoE GPT of its own shape (width 96, 3 heads,
// 48 tokens, 4 layers, every 2nd MoE with 4 experts top-2; none of the
// configs the twin is checked on), trained as the single-process trainer
// does: zero gradients, then forward + backward of 4 micro-batches of 4
// sequences accumulating into the parameters.
models::GptConfig ProbeModelConfig() {
  models::GptConfig m;
  m.vocab_size = 24;
  m.seq_len = 48;
  m.n_layers = 4;
  m.d_model = 96;
  m.n_heads = 3;
  m.d_ff = 288;
  m.norm = models::NormKind::kRmsNorm;
  m.activation = models::ActivationKind::kSwiGlu;
  m.rope = true;
  m.moe.num_experts = 4;
  m.moe.top_k = 2;
  m.moe.every = 2;
  m.moe.d_ff_expert = 192;
  return m;
}
constexpr int64_t kProbeMicroBatch = 4;
constexpr int kProbeMicroBatches = 4;

class ProbeRank {
 public:
  static StatusOr<std::unique_ptr<ProbeRank>> Create(uint64_t seed) {
    auto model = models::Gpt::Create(ProbeModelConfig());
    if (!model.ok()) return model.status().WithContext("building the calibration probe model");
    auto probe = std::unique_ptr<ProbeRank>(new ProbeRank(std::move(model).value()));
    const models::GptConfig& m = probe->model_->config();
    std::vector<int64_t> ids(static_cast<size_t>(kProbeMicroBatch * m.seq_len));
    for (int b = 0; b < kProbeMicroBatches; ++b) {
      for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((seed + 31 * i + 7 * b) % m.vocab_size);
      probe->inputs_.push_back(Tensor::FromInts(ids, {kProbeMicroBatch, m.seq_len}));
      std::rotate(ids.begin(), ids.begin() + 1, ids.end());
      probe->targets_.push_back(Tensor::FromInts(ids, {kProbeMicroBatch, m.seq_len}));
    }
    probe->model_->SetTraining(true);
    return probe;
  }
  // Seconds of forward + backward per micro-batch of one step.
  double Step() {
    graph::GradModeGuard grad(true);
    const auto t0 = Clock::now();
    model_->ZeroGrad();
    for (int b = 0; b < kProbeMicroBatches; ++b) {
      models::GptOutput out = model_->Forward(inputs_[b], targets_[b]);
      out.ce_loss.Item();
      graph::Backward(out.loss, Tensor::Scalar(1.0 / kProbeMicroBatches, out.loss.dtype()));
    }
    return std::chrono::duration<double>(Clock::now() - t0).count() / kProbeMicroBatches;
  }
  // Forward + backward of every block on its own tape, one block after the
  // other, calling `meet` after each forward and each backward (no-op:
  // free-running). Returns seconds.
  template <typename Meet>
  double BlockSteps(Meet&& meet) {
    graph::GradModeGuard grad(true);
    const auto t0 = Clock::now();
    for (int i = 0; i < model_->config().n_layers; ++i) {
      Tensor aux;
      Tensor y = model_->block(i).Forward(block_input_, true, 0, &aux);
      meet();
      graph::Backward(y, block_grad_);
      meet();
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  explicit ProbeRank(std::unique_ptr<models::Gpt> model)
      : model_(std::move(model)),
        block_input_(Leaf({kProbeMicroBatch, model_->config().seq_len, model_->config().d_model}, 0.1)),
        block_grad_(Filled({kProbeMicroBatch, model_->config().seq_len, model_->config().d_model}, 1e-3)) {}
  std::unique_ptr<models::Gpt> model_;
  std::vector<Tensor> inputs_, targets_;
  Tensor block_input_, block_grad_;
};

// `tessera sim meeting-probe`, run by `tessera sim calibrate` as a job of
// 1-thread ranks (one per core) under `tessera launch`: every rank runs
// forward + backward of the probe's blocks (BlockSteps) in alternating
// rounds, free-running and meeting the others after every block's forward
// and backward with a one-element all-reduce (as ranks meet at every tp
// all-reduce, ep all-to-all or pp send). A round takes its slowest rank's
// time. Rank 0 prints "meeting_us X": (median lockstep round - median free
// round) / meetings per round: what each meeting inside a step costs
// beyond its transfer (skew between the ranks, handing the collective to
// the communication thread and waking the waiting rank on a busy core).
Status MeetingProbe() {
  hal::SetNumThreads(1);
  auto world = comm::Communicator::FromEnvironment();
  if (!world.ok()) return world.status().WithContext("joining the meeting probe job");
  comm::Communicator& c = **world;
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ProbeRank> probe, ProbeRank::Create(1 + c.rank()));
  constexpr int kRounds = 8, kStepsPerRound = 6;
  const int meetings_per_round = kStepsPerRound * 2 * ProbeModelConfig().n_layers;
  Status failed;
  auto meet = [&] {
    float one = 1;
    if (Status st = c.AllReduce(&one, &one, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum); !st.ok()) {
      failed = st;
    }
  };
  probe->BlockSteps(meet);
  std::vector<double> rounds[2];  // free-running, lockstep: the slowest rank's seconds
  for (int round = 0; round < 2 * kRounds && failed.ok(); ++round) {
    const bool lockstep = round % 2 == 1;
    TESSERA_RETURN_IF_ERROR(c.Barrier());
    double t = 0;
    for (int i = 0; i < kStepsPerRound; ++i) t += lockstep ? probe->BlockSteps(meet) : probe->BlockSteps([] {});
    TESSERA_RETURN_IF_ERROR(c.AllReduce(&t, &t, 1, comm::DataType::kFloat64, comm::ReduceOp::kMax));
    rounds[lockstep ? 1 : 0].push_back(t);
  }
  TESSERA_RETURN_IF_ERROR(failed);
  const double free = Median(rounds[0]), locked = Median(rounds[1]);
  if (c.rank() == 0) {
    std::printf("free_round_ms %.3f\nlockstep_round_ms %.3f\nmeetings_per_round %d\nmeeting_us %.3f\n",
                1e3 * free, 1e3 * locked, meetings_per_round,
                1e6 * std::max(0.0, locked - free) / meetings_per_round);
  }
  return c.Barrier();
}

sim::TwinModel TwinModelOf(const models::GptConfig& m) {
  sim::TwinModel model{.vocab = m.vocab_size,
                       .seq = m.seq_len,
                       .layers = m.n_layers,
                       .d_model = m.d_model,
                       .heads = m.n_heads,
                       .d_ff = m.ffn_dim(),
                       .gated_ffn = m.activation == models::ActivationKind::kSwiGlu,
                       .tied_embeddings = m.tie_embeddings,
                       .rope = m.rope,
                       .experts = m.moe.num_experts,
                       .top_k = m.moe.top_k,
                       .d_ff_expert = m.expert_ffn_dim(),
                       .moe = {}};
  for (int i = 0; i < m.n_layers; ++i) model.moe.push_back(m.IsMoeLayer(i));
  return model;
}

// Samples the probe's forward + backward time per micro-batch while
// `neighbours` other threads run probes of their own (the other ranks of a
// job with 1-thread ranks). The machine's speed drifts over seconds, so the
// calibration samples it in windows before and after the op
// micro-benchmarks and uses the median of all samples.
class ContextProbe {
 public:
  static StatusOr<std::unique_ptr<ContextProbe>> Create(int neighbours) {
    auto c = std::unique_ptr<ContextProbe>(new ContextProbe);
    for (int i = 0; i <= neighbours; ++i) {
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ProbeRank> rank, ProbeRank::Create(1 + i));
      c->ranks_.push_back(std::move(rank));
    }
    return c;
  }
  // Steps for ~`seconds` (>= 6 steps) after 2 warm-up steps.
  void Sample(double seconds) {
    size_t next = 1;
    BusyNeighbours busy(static_cast<int>(ranks_.size()) - 1, [&] {
      ProbeRank* mine = ranks_[next++].get();
      return std::function<void()>([mine] { mine->Step(); });
    });
    ProbeRank& probe = *ranks_[0];
    probe.Step();
    probe.Step();
    const auto start = Clock::now();
    for (int i = 0; i < 6 || (std::chrono::duration<double>(Clock::now() - start).count() < seconds && i < 200); ++i) {
      samples_.push_back(probe.Step());
    }
  }
  // The median sample / the probe's op-sum under `h`.
  double Factor(const sim::HostCalibration& h) const {
    const double median = Median(samples_);
    sim::HostCalibration isolated = h;
    isolated.context_factor = 1;
    const double op_sum =
        sim::OpSumSecondsPerMicroBatch(isolated, TwinModelOf(ProbeModelConfig()), kProbeMicroBatch);
    TLOG(INFO, "context probe, {} thread(s): median {:.3f} ms per micro-batch over {} steps; op-sum {:.3f} ms",
         h.threads, 1e3 * median, samples_.size(), 1e3 * op_sum);
    return median / op_sum;
  }

 private:
  ContextProbe() = default;
  std::vector<std::unique_ptr<ProbeRank>> ranks_;
  std::vector<double> samples_;
};

// MeasureHost + MeasureOps, repeated (up to 3 attempts) while the linear
// curve is off by more than 25 % rms or an op's time falls by > 30 % with
// size (disturbed points); keeps the attempt with the best worst figure.
// (The forward-only GEMM curve is recorded, not used.)
// A 1-thread calibration (a rank of a multi-rank job) runs beside busy
// neighbours on the other cores. Then the context factor from the probe.
StatusOr<sim::HostCalibration> MeasureHostRobust(int threads, const hal::PeakInfo& peak, int cores) {
  const int neighbour_count = threads == 1 ? cores - 1 : 0;
  hal::SetNumThreads(threads);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ContextProbe> probe, ContextProbe::Create(neighbour_count));
  probe->Sample(0.4);
  auto neighbours = std::make_unique<BusyNeighbours>(neighbour_count, LinearLoad);
  sim::HostCalibration best;
  double best_worst = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    TESSERA_ASSIGN_OR_RETURN(sim::HostCalibration h, MeasureHost(threads, peak));
    TESSERA_ASSIGN_OR_RETURN(WorstFit worst, MeasureOps(h));
    MeasureOptimizer(h);
    if (attempt == 0 || worst.rms < best_worst) {
      best = h;
      best_worst = worst.rms;
    }
    if (best_worst <= 0.25) break;
    std::fprintf(stderr, "calibrate: %d thread(s): %s off by %.0f %% (machine busy?)%s\n", threads,
                 worst.what.c_str(), 100 * worst.rms, attempt < 2 ? "; measuring again" : "");
  }
  neighbours.reset();
  probe->Sample(0.4);
  best.context_factor = probe->Factor(best);
  return best;
}

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs this tessera binary with `args` ("{bin}" in them is replaced by its
// path) and returns its output (stdout and stderr).
StatusOr<std::string> RunSelf(const std::string& args) {
  std::array<char, 4096> exe{};
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n <= 0) return Internal("cannot find the tessera binary (/proc/self/exe)");
  const std::string bin(exe.data(), static_cast<size_t>(n));
  std::string expanded = args;
  for (size_t at = expanded.find("{bin}"); at != std::string::npos; at = expanded.find("{bin}", at + bin.size())) {
    expanded.replace(at, 5, bin);
  }
  const std::string cmd = fmt::format("'{}' {} 2>&1", bin, expanded);
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return Internal("cannot run '{}'", cmd);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t got; (got = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), got);
  const int rc = pclose(p);
  if (rc != 0) return Internal("'{}' failed (status {}):\n{}", cmd, rc, out);
  return out;
}

struct CalibrateArgs {
  std::string out = "configs/clusters/this-machine.toml";
  std::string ccl_perf;
  int ranks = 2;
  bool json = false;
};

Status Calibrate(const CalibrateArgs& a) {
  if (a.ranks < 1) return InvalidArgument("--ranks {} must be >= 1", a.ranks);
  const auto t0 = Clock::now();
  const int cores = std::max(1, hal::MachineTopology().cores);
  hal::SetNumThreads(cores);
  const hal::PeakInfo& peak = hal::MachinePeak();
  sim::MachineCalibration c;
  c.cpu = peak.cpu_model;
  c.cores = cores;
  TESSERA_ASSIGN_OR_RETURN(c.all, MeasureHostRobust(cores, peak, cores));
  TESSERA_ASSIGN_OR_RETURN(c.one, MeasureHostRobust(1, peak, cores));
  if (cores > 1) {
    TESSERA_ASSIGN_OR_RETURN(const std::string out,
                             RunSelf(fmt::format("launch --nproc {} -- '{{bin}}' sim meeting-probe", cores)));
    const size_t at = out.find("meeting_us ");
    if (at == std::string::npos) return Internal("the meeting probe printed no meeting_us:\n{}", out);
    c.one.meeting_s = std::strtod(out.c_str() + at + 11, nullptr) * 1e-6;
  }
  hal::SetNumThreads(cores);
  std::string ccl;
  if (a.ccl_perf.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ccl, RunSelf(fmt::format(
                                      "launch --nproc {} -- '{{bin}}' ccl-perf allreduce -b 1K -e 4M -f 4 -n 30 -w 5 -c 0",
                                      c.link_ranks)));
    c.link_source = "tessera launch --nproc 2 -- tessera ccl-perf allreduce -b 1K -e 4M -f 4 -n 30 -w 5 -c 0";
  } else {
    TESSERA_ASSIGN_OR_RETURN(ccl, ReadFile(a.ccl_perf));
    c.link_source = a.ccl_perf;
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<sim::TransferSample> rows, sim::ParseNcclTestsOutput(ccl));
  TESSERA_ASSIGN_OR_RETURN(c.link, sim::FitAllReduceLink(rows, c.link_ranks));
  c.measure_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const std::string spec_text = sim::MachineClusterToml(c, a.ranks);
  TESSERA_RETURN_IF_ERROR(sim::ParseClusterSpec(spec_text, a.out).status());
  const std::string twin_path = sim::TwinPathFor(a.out);
  std::ofstream(a.out) << spec_text;
  std::ofstream(twin_path) << sim::TwinToml(c);
  if (a.json) {
    auto host = [](const sim::HostCalibration& h) {
      return nlohmann::json{{"threads", h.threads},
                            {"peak_gflops", h.peak_flops / 1e9},
                            {"triad_gbyte_s", h.triad_bytes_per_s / 1e9},
                            {"gemm_max_efficiency", h.gemm.max_efficiency},
                            {"gemm_half_work_mflop", h.gemm.half_work_flops / 1e6},
                            {"gemm_rms_rel_error", h.gemm_rms_rel_error},
                            {"kernel_overhead_us", h.kernel_overhead_s * 1e6},
                            {"elementwise_gbyte_s", h.elementwise_bytes_per_s / 1e9},
                            {"autograd_op_us", h.autograd_op_s * 1e6}};
    };
    nlohmann::json j = {{"cluster", a.out},        {"twin", twin_path},
                        {"cpu", c.cpu},            {"cores", c.cores},
                        {"ranks", a.ranks},        {"all", host(c.all)},
                        {"one", host(c.one)},      {"link_alpha_us", c.link.alpha_s * 1e6},
                        {"link_beta_gbyte_s", c.link.beta_bytes_per_s / 1e9},
                        {"link_rms_rel_error", c.link.rms_rel_error},
                        {"measure_seconds", c.measure_seconds}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s\n", sim::TwinToml(c).c_str());
    std::printf("wrote %s (%d ranks) and %s in %.1f s\n", a.out.c_str(), a.ranks, twin_path.c_str(),
                c.measure_seconds);
  }
  return Status::Ok();
}

struct PredictArgs {
  std::string cluster = "configs/clusters/this-machine.toml";
  std::string config;
  std::vector<std::string> overrides;
  bool json = false;
};

Status Predict(const PredictArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(a.config, a.overrides));
  TESSERA_ASSIGN_OR_RETURN(sim::MachineCalibration c, sim::LoadTwinToml(sim::TwinPathFor(a.cluster)));
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  const sim::TwinModel model = TwinModelOf(config.model);
  const parallel::ParallelConfig& p = config.parallel;
  sim::TwinRun run{.global_batch = config.train.global_batch,
                   .micro_batch = config.train.micro_batch,
                   .dp = p.dp,
                   .tp = p.tp,
                   .pp = p.pp,
                   .ep = p.ep,
                   .zero = p.zero};
  TESSERA_ASSIGN_OR_RETURN(sim::TwinPrediction r, sim::PredictTrainStep(c, spec, model, run));
  if (a.json) {
    std::printf("%s\n", sim::TwinPredictionJson(r).c_str());
  } else {
    std::printf("%s", sim::DescribeTwinPrediction(r).c_str());
  }
  return Status::Ok();
}

}  // namespace

void RegisterSimCalibrateCommand(CLI::App& app) {
  CLI::App* sim = app.get_subcommand("sim");
  auto cargs = std::make_shared<CalibrateArgs>();
  CLI::App* cal = sim->add_subcommand("calibrate", "measure this machine and write its cluster spec (the twin)");
  cal->add_option("--out", cargs->out, "cluster spec TOML to write (the twin constants go to FILE's .twin.toml)");
  cal->add_option("--ranks", cargs->ranks, "ranks sharing the cores that the spec models (devices)");
  cal->add_option("--ccl-perf", cargs->ccl_perf, "read the all-reduce sweep from this ccl-perf output instead");
  cal->add_flag("--json", cargs->json, "print one JSON object");
  cal->callback([cargs] { ExitWith(Calibrate(*cargs)); });
  auto pargs = std::make_shared<PredictArgs>();
  CLI::App* pred = sim->add_subcommand("predict", "the twin's step time for a `tessera train` config here");
  pred->add_option("config", pargs->config, "training config TOML")->required();
  pred->add_option("--cluster", pargs->cluster, "calibrated cluster spec (with its .twin.toml)");
  pred->add_option("--set", pargs->overrides, "override a config key (section.key=value)");
  pred->add_flag("--json", pargs->json, "print one JSON object");
  pred->callback([pargs] { ExitWith(Predict(*pargs)); });
  CLI::App* probe = sim->add_subcommand(
      "meeting-probe", "(run by calibrate under tessera launch) what a collective amid compute costs each rank");
  probe->callback([] { ExitWith(MeetingProbe()); });
}
TESSERA_CLI_COMMAND(81, RegisterSimCalibrateCommand);

}  // namespace tessera::cli

// Calibration of the "this machine" twin: fits of measured micro-benchmark
// samples (GEMMs, element-wise kernels, autograd op overheads, all-reduces)
// to the simulator's constants, and the TOML files they are stored in.
//
//  - GEMM: t = (flops + h) / (peak * e) is a line in flops, so a relative
//    least-squares line t = a + b flops gives e = 1 / (b peak) and h = a / b:
//    the EfficiencyCurve (max_efficiency e, half_work_flops h) of
//    device_model.h against the measured peak.
//  - Element-wise kernels: t = c0 + bytes / bw (per-kernel overhead, and the
//    bandwidth at activation sizes, which live in cache here).
//  - Link: a ring all-reduce of S bytes over n ranks takes
//    2(n-1) alpha + 2(n-1)/n S / beta (collective_cost.h), a line in S.
//  - Linear layers (forward + backward, 3 GEMMs): t = fixed + 6 m n k /
//    (peak e q(m) q(n) q(k)), q(d) = d / (d + half_d): the shape-aware
//    efficiency of the planner's GEMM model, fitted over a sweep of shapes
//    (FitLinearCost: a grid over the half dimensions, least squares for the
//    rest).
//  - Fused causal attention (forward + backward): t = fixed + a (B H T Dh)
//    + b (B H T^2 Dh) + c (B H T^2), non-negative least squares.
//  - Other autograd op kinds: measured points over a sweep of sizes,
//    interpolated (OpLine), and a line t = fixed + per_unit x reported.
//
// Each host calibration is for one kernel thread count (all cores: one
// process; 1 thread: one of several ranks sharing the cores).
// MachineClusterToml writes a ClusterSpec TOML (LoadClusterSpec accepts it)
// modelling `ranks` ranks sharing the machine: each device gets
// peak / ranks, triad bandwidth / ranks, and the intra-node fabric is the
// fitted link (alpha = endpoint latency, beta = port bandwidth). The
// constants the cluster spec has no field for (GEMM curves, per-op
// overheads) go to a companion "twin" TOML (TwinToml / ParseTwinToml).
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/sim/device_model.h"

namespace tessera::sim {

// y ~ intercept + slope x, minimizing sum(((intercept + slope x_i) - y_i) / y_i)^2.
struct LineFit {
  double intercept = 0;
  double slope = 0;
  double rms_rel_error = 0;  // root-mean-square relative residual
};
// Needs >= 2 samples with positive y and two distinct x.
StatusOr<LineFit> FitLineRelative(const std::vector<double>& x, const std::vector<double>& y);

struct GemmSample {
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;
  double Flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

struct CurveFit {
  EfficiencyCurve curve;
  double rms_rel_error = 0;
};
// Fits max_efficiency and half_work_flops against `peak_flops` (> 0).
// Errors when the samples do not determine a positive slope and intercept.
StatusOr<CurveFit> FitEfficiencyCurve(const std::vector<GemmSample>& samples, double peak_flops);

struct TransferSample {
  double bytes = 0;
  double seconds = 0;
};

struct LinkFit {
  double alpha_s = 0;           // per-step latency
  double beta_bytes_per_s = 0;  // per-direction bandwidth
  double rms_rel_error = 0;
};
// Fits alpha and beta of a ring all-reduce over `ranks` (>= 2) ranks: beta
// from the slope over the samples of >= beta_min_bytes (the sizes gradients
// have; smaller ones run from cache at a different rate), alpha from the
// smallest sample (rms_rel_error is over all samples).
StatusOr<LinkFit> FitAllReduceLink(const std::vector<TransferSample>& samples, int ranks,
                                   double beta_min_bytes = 1 << 20);

// Reads the data rows of nccl-tests / `tessera ccl-perf` output (the
// "[rank 0] " prefix of `tessera launch` is allowed): size (bytes) and the
// out-of-place time (us). Errors when there is no row.
StatusOr<std::vector<TransferSample>> ParseNcclTestsOutput(const std::string& text);

// Merges repeated sweeps: the fastest time at each size, sizes ascending.
// A sweep's mean can carry one stall (a page-fault storm, a preempted
// rank); the fastest of several repeats is the link's own time.
std::vector<TransferSample> FastestPerSize(const std::vector<TransferSample>& samples);

// Non-negative least squares of y ~ sum_j coef_j features[i][j] minimizing
// the relative residuals ((fit - y) / y); at most 6 features, y > 0.
// Features whose coefficient would be negative are dropped (set to 0).
struct RelativeFit {
  std::vector<double> coef;
  double rms_rel_error = 0;
};
StatusOr<RelativeFit> FitNonNegativeRelative(const std::vector<std::vector<double>>& features,
                                             const std::vector<double>& y);

// What a fitted curve misses at the measured points: measured / fitted at
// each sample, in log2 coordinates, interpolated by inverse squared
// distance over the samples within 2 (log2 units) of the query (1 beyond
// them): the curve carries the trend, the measurements their detail.
struct Residuals {
  std::vector<std::array<double, 4>> points;  // log2 a, log2 b, log2 c, ratio
  double At(double a, double b, double c) const;
  void Add(double a, double b, double c, double ratio);
  // "a,b,c:ratio ..." (the twin TOML's value).
  std::string Text() const;
  static StatusOr<Residuals> Parse(const std::string& text);
};

// Linear layer y[m, n] = x[m, k] W^T, forward and both backward GEMMs with
// the tape: t = fixed + 6 m n k / (peak max_efficiency q(m) q(n) q(k)),
// q(d) = d / (d + half_d).
struct LinearCost {
  double fixed_s = 0;
  double max_efficiency = 0.5;
  double half_m = 0, half_n = 0, half_k = 0;
  double rms_rel_error = 0;  // of the curve alone
  Residuals residuals;       // over (m, n, k)
  // The curve times the residual correction.
  double Seconds(double m, double n, double k, double peak_flops) const;
  double CurveSeconds(double m, double n, double k, double peak_flops) const;
};
struct LinearSample {
  double m = 0, n = 0, k = 0, seconds = 0;
};
// Needs >= 4 samples; the half dimensions are searched over 0, 1, 2, 4 ... 1024.
StatusOr<LinearCost> FitLinearCost(const std::vector<LinearSample>& samples, double peak_flops);

// Fused causal attention over bh = batch x heads rows of t tokens, head
// width dh, forward + backward: t = fixed + per_element (bh t dh)
// + per_score_dim (bh t^2 dh) + per_score (bh t^2).
struct AttentionCost {
  double fixed_s = 0, per_element_s = 0, per_score_dim_s = 0, per_score_s = 0;
  double rms_rel_error = 0;  // of the curve alone
  Residuals residuals;       // over (bh, t, dh)
  double Seconds(double bh, double t, double dh) const;
  double CurveSeconds(double bh, double t, double dh) const;
};
struct AttentionSample {
  double bh = 0, t = 0, dh = 0, seconds = 0;
};
StatusOr<AttentionCost> FitAttentionCost(const std::vector<AttentionSample>& samples);

// Autograd op kinds of Tessera's transformer besides linear layers and
// attention, each timed forward + backward (tape included) over a sweep of
// sizes; x = fp32 elements of the op's main tensor.
enum class OpKind {
  kNorm,          // RMSNorm / LayerNorm over [rows, d]
  kPointwise,     // binary element-wise (residual add, gate multiply)
  kActivation,    // SwiGLU / GELU, x = output elements
  kRope,          // rotary embedding of q or k
  kCopy,          // head-major <-> token-major copies, concat
  kCrossEntropy,  // softmax cross-entropy over [rows, vocab]
  kSoftmax,       // row softmax / top-k over small rows (router)
  kRows,          // GatherRows / ScatterAddRows / embedding lookup, x = row elements
};
inline constexpr int kOpKinds = 8;
const char* OpKindName(OpKind kind);

// An op kind's cost: the measured points (x, seconds), interpolated
// piecewise-linearly (kernels switch code paths and thread counts with size,
// so a single line misfits by tens of percent at 2 threads), and the
// least-squares line through them (reported; used when there are no points).
struct OpLine {
  double fixed_s = 0;                             // per op
  double per_unit_s = 0;                          // per element (per FLOP for attention)
  std::vector<std::pair<double, double>> points;  // increasing x
  // Interpolates the points; beyond them it extends the end segments (never
  // below half the nearest point's time, never decreasing past the last).
  double At(double x) const;
  // "x:microseconds ..." (the twin TOML's <kind>_points value).
  std::string PointsText() const;
  static StatusOr<std::vector<std::pair<double, double>>> ParsePoints(const std::string& text);
};

// One kernel-thread configuration of the machine.
struct HostCalibration {
  int threads = 1;
  double peak_flops = 0;         // fp32 FLOP/s of `threads` threads (register-only peak)
  double triad_bytes_per_s = 0;  // STREAM triad over DRAM-sized arrays
  EfficiencyCurve gemm;          // fp32 GEMMs, against peak_flops
  double gemm_rms_rel_error = 0;
  double kernel_overhead_s = 0;        // element-wise kernel launch/dispatch cost
  double elementwise_bytes_per_s = 0;  // element-wise kernels at activation sizes
  double autograd_op_s = 0;            // forward + tape + backward of a tiny autograd op
  // Gradient-norm clipping + AdamW step (optim/): per parameter tensor and
  // per parameter (0 = not measured: 28 bytes per parameter at triad rate).
  double optimizer_per_tensor_s = 0;
  double optimizer_per_param_s = 0;
  LinearCost linear;  // against peak_flops
  AttentionCost attention;
  OpLine ops[kOpKinds];
  // Step context: measured / predicted forward + backward time of a probe
  // model's micro-batches inside real training steps (a small MoE GPT of
  // its own shape, gradients accumulated over micro-batches, the other
  // cores running the same probe for a 1-thread rank). What the isolated
  // op timings above miss in a step: operands evicted by the rest of the
  // step, allocator churn, scheduling noise, neighbours (1 = nothing).
  double context_factor = 1;
  const OpLine& op(OpKind kind) const { return ops[static_cast<int>(kind)]; }
};

struct MachineCalibration {
  std::string cpu;
  int cores = 1;
  HostCalibration all;  // threads = cores (one process)
  HostCalibration one;  // 1 thread (one of several ranks)
  // Seconds a rank loses at each meeting with the other ranks inside a step
  // (a tp all-reduce, ep all-to-all or pp send amid compute) beyond the
  // transfer itself — skew, hand-off to the communication thread, wake-ups
  // on busy cores — by the job's rank count (`tessera sim meeting-probe` at
  // several counts; x = ranks, y = seconds of wall time with every rank busy).
  OpLine meeting;
  // The context factor of a 1-thread rank by the job's rank count (x =
  // ranks, y = factor): the probe models' steps with ranks - 1 busy
  // neighbours vs their op-sum times the cores' time share — what ranks
  // that outnumber the cores lose beyond the share itself (caches refilled
  // after every switch, scheduling). The first point is one.context_factor.
  OpLine context;
  // The communication library's selector model (comm/algo/cost_model.h:
  // inputs and measured constants, algo::SerializeModel) of a communicator
  // of each size, recorded by the meeting probes: the twin prices
  // collectives with the algorithm and α-β model the runtime itself uses.
  std::map<int, std::string> comm_models;
  LinkFit link;             // intra-host all-reduce link between ranks
  int link_ranks = 2;       // ranks of the all-reduce measurement
  std::string link_source;  // how the link was measured
  double measure_seconds = 0;

  // The host calibration of one rank of a `ranks`-rank job: all cores for 1
  // rank, else 1 thread each (ranks that outnumber the cores share them:
  // sim::ReplayPipeline's processor sharing, not a slower host).
  const HostCalibration& PerRank(int ranks) const { return ranks <= 1 ? all : one; }
  // Seconds per meeting of a `ranks`-rank job (0 for one rank).
  double MeetingSeconds(int ranks) const;
  // The context factor of a rank of a `ranks`-rank job.
  double ContextFactor(int ranks) const;

  // Assumptions the cluster spec needs that cannot be measured here, each
  // with its source (MachineClusterToml writes them as comments).
  double host_memory_bytes = 0;  // /proc/meminfo MemTotal
  double bf16_peak_flops = 0;    // all cores (hal::MachinePeak)
};

// ClusterSpec TOML for `ranks` ranks (>= 1) sharing this machine.
std::string MachineClusterToml(const MachineCalibration& c, int ranks);
// The twin constants (everything in MachineCalibration).
std::string TwinToml(const MachineCalibration& c);
StatusOr<MachineCalibration> ParseTwinToml(const std::string& text, const std::string& source);
StatusOr<MachineCalibration> LoadTwinToml(const std::string& path);
// "dir/x.toml" -> "dir/x.twin.toml".
std::string TwinPathFor(const std::string& cluster_path);

}  // namespace tessera::sim

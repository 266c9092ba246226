#include "tessera/sim/calibrate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/comm/algo/cost_model.h"
#include "tessera/sim/toml_reader.h"

namespace tessera::sim {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;
constexpr double kMicro = 1e-6;

StatusOr<HostCalibration> ReadHost(const TomlTable& t) {
  HostCalibration h;
  TESSERA_ASSIGN_OR_RETURN(int64_t threads, t.Integer("threads"));
  if (threads < 1) return t.Error("threads", "must be >= 1");
  h.threads = static_cast<int>(threads);
  TESSERA_ASSIGN_OR_RETURN(h.peak_flops, t.Number("peak_gflops"));
  TESSERA_ASSIGN_OR_RETURN(h.triad_bytes_per_s, t.Number("triad_gbyte_s"));
  TESSERA_ASSIGN_OR_RETURN(h.gemm.max_efficiency, t.Number("gemm_max_efficiency"));
  TESSERA_ASSIGN_OR_RETURN(h.gemm.half_work_flops, t.Number("gemm_half_work_mflop"));
  TESSERA_ASSIGN_OR_RETURN(h.gemm_rms_rel_error, t.Number("gemm_rms_rel_error", 0.0));
  TESSERA_ASSIGN_OR_RETURN(h.kernel_overhead_s, t.Number("kernel_overhead_us"));
  TESSERA_ASSIGN_OR_RETURN(h.elementwise_bytes_per_s, t.Number("elementwise_gbyte_s"));
  TESSERA_ASSIGN_OR_RETURN(h.autograd_op_s, t.Number("autograd_op_us"));
  TESSERA_ASSIGN_OR_RETURN(h.optimizer_per_tensor_s, t.Number("optimizer_per_tensor_us", 0.0));
  TESSERA_ASSIGN_OR_RETURN(h.optimizer_per_param_s, t.Number("optimizer_per_param_ns", 0.0));
  if (h.optimizer_per_tensor_s < 0 || h.optimizer_per_param_s < 0) {
    return t.Error("optimizer_per_tensor_us", "optimizer costs must be >= 0");
  }
  h.optimizer_per_tensor_s *= kMicro;
  h.optimizer_per_param_s *= 1e-9;
  TESSERA_ASSIGN_OR_RETURN(h.context_factor, t.Number("context_factor", 1.0));
  if (!(h.context_factor > 0)) return t.Error("context_factor", "must be > 0");
  TESSERA_ASSIGN_OR_RETURN(h.linear.fixed_s, t.Number("linear_fixed_us"));
  TESSERA_ASSIGN_OR_RETURN(h.linear.max_efficiency, t.Number("linear_max_efficiency"));
  TESSERA_ASSIGN_OR_RETURN(h.linear.half_m, t.Number("linear_half_m"));
  TESSERA_ASSIGN_OR_RETURN(h.linear.half_n, t.Number("linear_half_n"));
  TESSERA_ASSIGN_OR_RETURN(h.linear.half_k, t.Number("linear_half_k"));
  TESSERA_ASSIGN_OR_RETURN(h.linear.rms_rel_error, t.Number("linear_rms_rel_error", 0.0));
  if (!(h.linear.max_efficiency > 0) || h.linear.fixed_s < 0 || h.linear.half_m < 0 || h.linear.half_n < 0 ||
      h.linear.half_k < 0) {
    return t.Error("linear_max_efficiency", "linear cost needs max efficiency > 0 and fixed, half dimensions >= 0");
  }
  h.linear.fixed_s *= kMicro;
  TESSERA_ASSIGN_OR_RETURN(std::string linear_residuals, t.String("linear_residuals", ""));
  auto lr = Residuals::Parse(linear_residuals);
  if (!lr.ok()) return t.Error("linear_residuals", lr.status().message());
  h.linear.residuals = *std::move(lr);
  TESSERA_ASSIGN_OR_RETURN(h.attention.fixed_s, t.Number("attention_fixed_us"));
  TESSERA_ASSIGN_OR_RETURN(h.attention.per_element_s, t.Number("attention_per_element_ns"));
  TESSERA_ASSIGN_OR_RETURN(h.attention.per_score_dim_s, t.Number("attention_per_score_dim_ps"));
  TESSERA_ASSIGN_OR_RETURN(h.attention.per_score_s, t.Number("attention_per_score_ns"));
  TESSERA_ASSIGN_OR_RETURN(h.attention.rms_rel_error, t.Number("attention_rms_rel_error", 0.0));
  if (h.attention.fixed_s < 0 || h.attention.per_element_s < 0 || h.attention.per_score_dim_s < 0 ||
      h.attention.per_score_s < 0) {
    return t.Error("attention_fixed_us", "attention costs must be >= 0");
  }
  h.attention.fixed_s *= kMicro;
  TESSERA_ASSIGN_OR_RETURN(std::string attention_residuals, t.String("attention_residuals", ""));
  auto ar = Residuals::Parse(attention_residuals);
  if (!ar.ok()) return t.Error("attention_residuals", ar.status().message());
  h.attention.residuals = *std::move(ar);
  h.attention.per_element_s *= 1e-9;
  h.attention.per_score_dim_s *= 1e-12;
  h.attention.per_score_s *= 1e-9;
  for (int i = 0; i < kOpKinds; ++i) {
    const std::string name = OpKindName(static_cast<OpKind>(i));
    TESSERA_ASSIGN_OR_RETURN(h.ops[i].fixed_s, t.Number(name + "_fixed_us"));
    TESSERA_ASSIGN_OR_RETURN(h.ops[i].per_unit_s, t.Number(name + "_per_unit_ns"));
    if (h.ops[i].fixed_s < 0 || h.ops[i].per_unit_s < 0) return t.Error(name + "_fixed_us", "must be >= 0");
    TESSERA_ASSIGN_OR_RETURN(std::string points, t.String(name + "_points", ""));
    auto parsed = OpLine::ParsePoints(points);
    if (!parsed.ok()) return t.Error(name + "_points", parsed.status().message());
    h.ops[i].points = *std::move(parsed);
    h.ops[i].fixed_s *= kMicro;
    h.ops[i].per_unit_s *= 1e-9;
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  if (h.peak_flops <= 0 || h.triad_bytes_per_s <= 0 || h.gemm.max_efficiency <= 0 || h.gemm.half_work_flops < 0 ||
      h.kernel_overhead_s < 0 || h.elementwise_bytes_per_s <= 0 || h.autograd_op_s < 0) {
    return t.Error("", "rates must be > 0 and overheads >= 0");
  }
  h.peak_flops *= kGiga;
  h.triad_bytes_per_s *= kGiga;
  h.gemm.half_work_flops *= 1e6;
  h.kernel_overhead_s *= kMicro;
  h.elementwise_bytes_per_s *= kGiga;
  h.autograd_op_s *= kMicro;
  return h;
}

// "ranks:factor ..." (OpLine::ParsePoints' format, values unscaled).
std::string ContextPointsText(const OpLine& l) {
  std::string s;
  for (const auto& [x, f] : l.points) s += fmt::format("{}{:.6g}:{:.6g}", s.empty() ? "" : " ", x, f);
  return s;
}

std::string HostToml(const char* table, const HostCalibration& h) {
  std::string ops =
      fmt::format("optimizer_per_tensor_us = {:.4f}\noptimizer_per_param_ns = {:.5f}\ncontext_factor = {:.4f}\n",
                  h.optimizer_per_tensor_s / kMicro, h.optimizer_per_param_s * 1e9, h.context_factor);
  ops += fmt::format(
      "linear_fixed_us = {:.4f}\nlinear_max_efficiency = {:.4f}\nlinear_half_m = {}\nlinear_half_n = {}\n"
      "linear_half_k = {}\nlinear_rms_rel_error = {:.4f}\nlinear_residuals = \"{}\"\n",
      h.linear.fixed_s / kMicro, h.linear.max_efficiency, h.linear.half_m, h.linear.half_n, h.linear.half_k,
      h.linear.rms_rel_error, h.linear.residuals.Text());
  ops += fmt::format(
      "attention_fixed_us = {:.4f}\nattention_per_element_ns = {:.6f}\nattention_per_score_dim_ps = {:.6f}\n"
      "attention_per_score_ns = {:.6f}\nattention_rms_rel_error = {:.4f}\nattention_residuals = \"{}\"\n",
      h.attention.fixed_s / kMicro, h.attention.per_element_s * 1e9, h.attention.per_score_dim_s * 1e12,
      h.attention.per_score_s * 1e9, h.attention.rms_rel_error, h.attention.residuals.Text());
  for (int i = 0; i < kOpKinds; ++i) {
    const char* name = OpKindName(static_cast<OpKind>(i));
    ops += fmt::format("{}_fixed_us = {:.4f}\n{}_per_unit_ns = {:.6f}\n{}_points = \"{}\"\n", name,
                       h.ops[i].fixed_s / kMicro, name, h.ops[i].per_unit_s * 1e9, name, h.ops[i].PointsText());
  }
  return fmt::format(
             "[{}]\nthreads = {}\npeak_gflops = {:.2f}\ntriad_gbyte_s = {:.3f}\ngemm_max_efficiency = {:.4f}\n"
             "gemm_half_work_mflop = {:.4f}\ngemm_rms_rel_error = {:.4f}\nkernel_overhead_us = {:.3f}\n"
             "elementwise_gbyte_s = {:.3f}\nautograd_op_us = {:.3f}\n",
             table, h.threads, h.peak_flops / kGiga, h.triad_bytes_per_s / kGiga, h.gemm.max_efficiency,
             h.gemm.half_work_flops / 1e6, h.gemm_rms_rel_error, h.kernel_overhead_s / kMicro,
             h.elementwise_bytes_per_s / kGiga, h.autograd_op_s / kMicro) +
         ops;
}

}  // namespace

double OpLine::At(double x) const {
  if (points.empty()) return fixed_s + per_unit_s * x;
  if (points.size() == 1) return points[0].second * std::max(0.5, x / std::max(points[0].first, 1e-300));
  auto segment = [&](size_t i, double at) {
    const auto& [x0, t0] = points[i];
    const auto& [x1, t1] = points[i + 1];
    return t0 + (t1 - t0) * (at - x0) / (x1 - x0);
  };
  if (x <= points.front().first) return std::max(0.5 * points.front().second, segment(0, x));
  for (size_t i = 0; i + 1 < points.size(); ++i) {
    if (x <= points[i + 1].first) return segment(i, x);
  }
  return std::max(points.back().second, segment(points.size() - 2, x));
}

std::string OpLine::PointsText() const {
  std::string s;
  for (const auto& [x, t] : points) s += fmt::format("{}{:.6g}:{:.6g}", s.empty() ? "" : " ", x, t / kMicro);
  return s;
}

StatusOr<std::vector<std::pair<double, double>>> OpLine::ParsePoints(const std::string& text) {
  std::vector<std::pair<double, double>> out;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    const size_t colon = item.find(':');
    char* end_x = nullptr;
    char* end_t = nullptr;
    const std::string xs = item.substr(0, colon), ts = colon == std::string::npos ? "" : item.substr(colon + 1);
    const double x = std::strtod(xs.c_str(), &end_x);
    const double t = std::strtod(ts.c_str(), &end_t);
    if (colon == std::string::npos || *end_x != '\0' || *end_t != '\0' || xs.empty() || ts.empty() || !(t >= 0) ||
        (!out.empty() && !(x > out.back().first))) {
      return InvalidArgument("op points '{}': expected increasing 'x:microseconds' pairs", item);
    }
    out.emplace_back(x, t * kMicro);
  }
  return out;
}

const char* OpKindName(OpKind kind) {
  static constexpr const char* kNames[kOpKinds] = {"norm", "pointwise",     "activation", "rope",
                                                   "copy", "cross_entropy", "softmax",    "rows"};
  const int i = static_cast<int>(kind);
  TESSERA_CHECK(i >= 0 && i < kOpKinds, "bad OpKind {}", i);
  return kNames[i];
}

StatusOr<LineFit> FitLineRelative(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) {
    return InvalidArgument("line fit needs >= 2 (x, y) pairs, got {} x and {} y", x.size(), y.size());
  }
  // Weighted least squares with weights 1 / y^2: minimize sum w (a + b x - y)^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(y[i] > 0) || !std::isfinite(x[i])) {
      return InvalidArgument("line fit: sample {} has y = {} (must be > 0) and x = {}", i, y[i], x[i]);
    }
    const double w = 1.0 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
    sxx += w * x[i] * x[i];
    sxy += w * x[i] * y[i];
  }
  const double det = sw * sxx - sx * sx;
  if (!(std::fabs(det) > 1e-12 * sw * sxx)) return InvalidArgument("line fit: the x values are all equal");
  LineFit f;
  f.slope = (sw * sxy - sx * sy) / det;
  f.intercept = (sy - f.slope * sx) / sw;
  double sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = (f.intercept + f.slope * x[i] - y[i]) / y[i];
    sq += r * r;
  }
  f.rms_rel_error = std::sqrt(sq / static_cast<double>(x.size()));
  return f;
}

StatusOr<CurveFit> FitEfficiencyCurve(const std::vector<GemmSample>& samples, double peak_flops) {
  if (!(peak_flops > 0)) return InvalidArgument("GEMM curve fit: peak FLOP/s must be > 0, got {}", peak_flops);
  std::vector<double> x, y;
  for (const GemmSample& s : samples) {
    x.push_back(s.Flops());
    y.push_back(s.seconds);
  }
  TESSERA_ASSIGN_OR_RETURN(LineFit f, FitLineRelative(x, y));
  if (!(f.slope > 0)) return InvalidArgument("GEMM curve fit: time does not grow with work (slope {})", f.slope);
  CurveFit c;
  // t = (w + h) / (peak e): slope 1 / (peak e), intercept h / (peak e).
  c.curve.max_efficiency = 1.0 / (f.slope * peak_flops);
  c.curve.half_work_flops = std::max(0.0, f.intercept / f.slope);
  c.rms_rel_error = f.rms_rel_error;
  return c;
}

StatusOr<LinkFit> FitAllReduceLink(const std::vector<TransferSample>& samples, int ranks, double beta_min_bytes) {
  if (ranks < 2) return InvalidArgument("link fit: an all-reduce needs >= 2 ranks, got {}", ranks);
  if (samples.empty()) return InvalidArgument("link fit: no samples");
  std::vector<double> x, y;
  const TransferSample* smallest = &samples[0];
  for (const TransferSample& s : samples) {
    if (s.bytes < smallest->bytes) smallest = &s;
    if (s.bytes >= beta_min_bytes) {
      x.push_back(s.bytes);
      y.push_back(s.seconds);
    }
  }
  if (x.size() < 2) {
    return InvalidArgument("link fit: need >= 2 samples of >= {} bytes for the bandwidth, got {}", beta_min_bytes,
                           x.size());
  }
  TESSERA_ASSIGN_OR_RETURN(LineFit f, FitLineRelative(x, y));
  if (!(f.slope > 0)) return InvalidArgument("link fit: time does not grow with size (slope {})", f.slope);
  const double n = ranks;
  LinkFit l;
  l.beta_bytes_per_s = 2 * (n - 1) / n / f.slope;
  // The smallest message is latency: 2(n-1) alpha plus its (tiny) transfer.
  l.alpha_s = std::max(0.0, smallest->seconds - smallest->bytes * f.slope) / (2 * (n - 1));
  double sq = 0;
  for (const TransferSample& s : samples) {
    const double model = 2 * (n - 1) * l.alpha_s + s.bytes * f.slope;
    sq += (model - s.seconds) * (model - s.seconds) / (s.seconds * s.seconds);
  }
  l.rms_rel_error = std::sqrt(sq / static_cast<double>(samples.size()));
  return l;
}

StatusOr<std::vector<TransferSample>> ParseNcclTestsOutput(const std::string& text) {
  std::vector<TransferSample> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[rank ", 0) == 0) {
      const size_t end = line.find("] ");
      line = end == std::string::npos ? "" : line.substr(end + 2);
    }
    std::istringstream cols(line);
    std::vector<std::string> tok;
    for (std::string w; cols >> w;) tok.push_back(w);
    // size count type redop root time algbw busbw #wrong ...
    if (tok.size() < 9 || tok[0].empty() || tok[0][0] == '#') continue;
    char* end_size = nullptr;
    char* end_time = nullptr;
    const double size = std::strtod(tok[0].c_str(), &end_size);
    const double time_us = std::strtod(tok[5].c_str(), &end_time);
    if (*end_size != '\0' || *end_time != '\0' || !(size > 0) || !(time_us > 0)) continue;
    rows.push_back({size, time_us * kMicro});
  }
  if (rows.empty()) return InvalidArgument("no nccl-tests data rows (size count type redop root time ...) found");
  return rows;
}

std::vector<TransferSample> FastestPerSize(const std::vector<TransferSample>& samples) {
  std::map<double, double> fastest;
  for (const TransferSample& s : samples) {
    auto [it, inserted] = fastest.emplace(s.bytes, s.seconds);
    if (!inserted) it->second = std::min(it->second, s.seconds);
  }
  std::vector<TransferSample> out;
  for (const auto& [bytes, seconds] : fastest) out.push_back({bytes, seconds});
  return out;
}

double MachineCalibration::ContextFactor(int ranks) const {
  if (ranks <= 1) return all.context_factor;
  if (context.points.empty() || ranks <= context.points.front().first) return one.context_factor;
  if (ranks >= context.points.back().first) return context.points.back().second;
  return context.At(ranks);
}

double MachineCalibration::MeetingSeconds(int ranks) const {
  if (ranks <= 1 || meeting.points.empty()) return 0;
  return std::max(0.0, meeting.At(ranks));
}

std::string MachineClusterToml(const MachineCalibration& c, int ranks) {
  ranks = std::max(1, ranks);
  const HostCalibration& h = c.PerRank(ranks);
  // Ranks that outnumber the cores get a time share of them.
  const double share = ranks <= 1 ? 1.0 : std::min(1.0, static_cast<double>(c.cores) / ranks);
  const double bf16 = c.bf16_peak_flops * (ranks <= 1 ? 1.0 : share / std::max(1, c.cores));
  const double memory_gb = c.host_memory_bytes / kGiga;
  // Not measurable here (no RAPL powercap interface in this VM): per-core
  // power of server CPUs, 2-20 W per core in AMD EPYC 9004/9005 and Intel
  // Xeon 6 datasheets (TDP / cores); idle ~30 % of TDP.
  constexpr double kWattsPerCore = 10, kIdleFraction = 0.3;
  const double tdp = kWattsPerCore * c.cores / ranks;
  std::string s = fmt::format(
      "# This machine as a cluster, written by `tessera sim calibrate` ({:.1f} s of measurements).\n"
      "# {} ranks share {} cores of a {}: each device is one rank with {} kernel thread(s).\n"
      "# Measured here: peak_tflops_fp32 / _bf16 (FMA / VDPBF16PS peaks of those threads, a core share\n"
      "# when ranks outnumber cores), hbm_gbyte_s (STREAM triad share), hbm_gb (MemTotal / ranks), the\n"
      "# fabric (all-reduce link fitted from {}, {} ranks: alpha {:.3f} us per step, beta {:.2f} GB/s,\n"
      "# rms relative error {:.3f}).\n"
      "# Assumed (not measurable here), with sources: tdp_w = {} W per core (server CPU datasheets:\n"
      "# AMD EPYC 9004/9005 and Intel Xeon 6 list 2-20 W per core), idle_w = {:.0f} % of it; the thermal\n"
      "# fields are generic air-cooled values; mtbf_hours = 50,000 per device from Meta's Llama 3 report\n"
      "# (arXiv 2407.21783, 419 unexpected interruptions in 54 days on 16,384 GPUs: 16384 x 54 x 24 / 419).\n"
      "# GEMM curves and per-op costs: the companion .twin.toml.\n",
      c.measure_seconds, ranks, c.cores, c.cpu, h.threads, c.link_source, c.link_ranks, c.link.alpha_s / kMicro,
      c.link.beta_bytes_per_s / kGiga, c.link.rms_rel_error, kWattsPerCore, 100 * kIdleFraction);
  s += fmt::format("name = \"this-machine\"\ndescription = \"{} ranks sharing {} cores ({})\"\nsupernodes = 1\n\n",
                   ranks, c.cores, c.cpu);
  s += fmt::format(
      "[device]\nname = \"cpu-rank\"\npeak_tflops_fp32 = {:.6f}\npeak_tflops_bf16 = {:.6f}\npeak_tflops_fp8 = 0\n"
      "hbm_gb = {:.3f}\nhbm_gbyte_s = {:.3f}\nddr_link_gbyte_s = 0\ntdp_w = {:.2f}\nidle_w = {:.2f}\n"
      "thermal_limit_c = 95\nambient_c = 25\nthermal_resistance_c_per_w = 0.5\nmtbf_hours = 50000\n\n",
      h.peak_flops * share / kTera, (bf16 > 0 ? bf16 : h.peak_flops * share) / kTera, memory_gb / ranks,
      h.triad_bytes_per_s * share / kGiga, tdp, kIdleFraction * tdp);
  // No host memory tier beside the "device" memory (it is the same DRAM).
  s += fmt::format(
      "[supernode]\ndevices = {}\nddr_gb = 0\n\n[supernode.fabric]\nkind = \"switch\"\nendpoint_ports = 1\n"
      "port_gbyte_s = {:.4f}\nlink_latency_us = 0\nswitch_latency_us = 0\nendpoint_latency_us = {:.4f}\n",
      ranks, c.link.beta_bytes_per_s / kGiga, c.link.alpha_s / kMicro);
  return s;
}

std::string TwinToml(const MachineCalibration& c) {
  std::string s = fmt::format(
      "# Twin constants of this machine, written by `tessera sim calibrate` (docs/twin.md).\n"
      "cpu = \"{}\"\ncores = {}\nmeasure_seconds = {:.2f}\nhost_memory_gb = {:.3f}\nbf16_peak_gflops = {:.2f}\n\n",
      c.cpu, c.cores, c.measure_seconds, c.host_memory_bytes / kGiga, c.bf16_peak_flops / kGiga);
  s += HostToml("all", c.all) + "\n" + HostToml("one", c.one) + "\n";
  s += fmt::format(
      "[link]\nranks = {}\nsource = \"{}\"\nalpha_us = {:.4f}\nbeta_gbyte_s = {:.4f}\nrms_rel_error = {:.4f}\n",
      c.link_ranks, c.link_source, c.link.alpha_s / kMicro, c.link.beta_bytes_per_s / kGiga, c.link.rms_rel_error);
  s += fmt::format("\n[meeting]\npoints = \"{}\"  # ranks:microseconds per meeting\n", c.meeting.PointsText());
  s += fmt::format("\n[context]\npoints = \"{}\"  # ranks:factor (1-thread ranks)\n", ContextPointsText(c.context));
  s += "\n[comm]  # the selector's model of a communicator of N ranks (comm/algo/cost_model.h)\n";
  for (const auto& [ranks, line] : c.comm_models) s += fmt::format("ranks_{} = \"{}\"\n", ranks, line);
  return s;
}

StatusOr<MachineCalibration> ParseTwinToml(const std::string& text, const std::string& source) {
  TESSERA_ASSIGN_OR_RETURN(toml::table root, ParseTomlText(text, source));
  TomlTable t(root, source, "");
  MachineCalibration c;
  TESSERA_ASSIGN_OR_RETURN(c.cpu, t.String("cpu", ""));
  TESSERA_ASSIGN_OR_RETURN(int64_t cores, t.Integer("cores"));
  if (cores < 1) return t.Error("cores", "must be >= 1");
  c.cores = static_cast<int>(cores);
  TESSERA_ASSIGN_OR_RETURN(c.measure_seconds, t.Number("measure_seconds", 0.0));
  TESSERA_ASSIGN_OR_RETURN(c.host_memory_bytes, t.Number("host_memory_gb"));
  TESSERA_ASSIGN_OR_RETURN(c.bf16_peak_flops, t.Number("bf16_peak_gflops"));
  if (!(c.host_memory_bytes > 0) || !(c.bf16_peak_flops >= 0)) {
    return t.Error("host_memory_gb", "host memory must be > 0 and the bf16 peak >= 0");
  }
  c.host_memory_bytes *= kGiga;
  c.bf16_peak_flops *= kGiga;
  TESSERA_ASSIGN_OR_RETURN(TomlTable all, t.Table("all"));
  TESSERA_ASSIGN_OR_RETURN(c.all, ReadHost(all));
  TESSERA_ASSIGN_OR_RETURN(TomlTable one, t.Table("one"));
  TESSERA_ASSIGN_OR_RETURN(c.one, ReadHost(one));
  TESSERA_ASSIGN_OR_RETURN(TomlTable link, t.Table("link"));
  TESSERA_ASSIGN_OR_RETURN(int64_t link_ranks, link.Integer("ranks"));
  c.link_ranks = static_cast<int>(link_ranks);
  TESSERA_ASSIGN_OR_RETURN(c.link_source, link.String("source", ""));
  TESSERA_ASSIGN_OR_RETURN(c.link.alpha_s, link.Number("alpha_us"));
  TESSERA_ASSIGN_OR_RETURN(c.link.beta_bytes_per_s, link.Number("beta_gbyte_s"));
  TESSERA_ASSIGN_OR_RETURN(c.link.rms_rel_error, link.Number("rms_rel_error", 0.0));
  TESSERA_RETURN_IF_ERROR(link.Finish());
  TESSERA_ASSIGN_OR_RETURN(TomlTable meeting, t.Table("meeting"));
  TESSERA_ASSIGN_OR_RETURN(std::string meeting_points, meeting.String("points"));
  auto points = OpLine::ParsePoints(meeting_points);
  if (!points.ok()) return meeting.Error("points", points.status().message());
  c.meeting.points = *std::move(points);
  TESSERA_RETURN_IF_ERROR(meeting.Finish());
  TESSERA_ASSIGN_OR_RETURN(TomlTable context, t.Table("context"));
  TESSERA_ASSIGN_OR_RETURN(std::string context_points, context.String("points"));
  auto factors = OpLine::ParsePoints(context_points);
  if (!factors.ok()) return context.Error("points", factors.status().message());
  for (auto& [ranks, factor] : *factors) {
    factor /= kMicro;  // stored as plain factors, not microseconds
    if (!(factor > 0)) return context.Error("points", "factors must be > 0");
  }
  c.context.points = *std::move(factors);
  TESSERA_RETURN_IF_ERROR(context.Finish());
  TESSERA_ASSIGN_OR_RETURN(TomlTable comm, t.Table("comm"));
  for (int ranks = 1; ranks <= 1024; ++ranks) {
    const std::string key = fmt::format("ranks_{}", ranks);
    if (!comm.Has(key)) continue;
    TESSERA_ASSIGN_OR_RETURN(c.comm_models[ranks], comm.String(key));
    auto model = comm::algo::ParseModel(c.comm_models[ranks]);
    if (!model.ok()) return comm.Error(key, model.status().message());
    if (model->first.size != ranks) return comm.Error(key, fmt::format("model of {} ranks", model->first.size));
  }
  TESSERA_RETURN_IF_ERROR(comm.Finish());
  TESSERA_RETURN_IF_ERROR(t.Finish());
  if (c.link.alpha_s < 0 || !(c.link.beta_bytes_per_s > 0)) {
    return InvalidArgument("{}: link needs alpha_us >= 0 and beta_gbyte_s > 0", source);
  }
  c.link.alpha_s *= kMicro;
  c.link.beta_bytes_per_s *= kGiga;
  return c;
}

StatusOr<MachineCalibration> LoadTwinToml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open twin calibration '{}' (run `tessera sim calibrate`)", path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParseTwinToml(text.str(), path);
}

std::string TwinPathFor(const std::string& cluster_path) {
  const std::string ext = ".toml";
  if (cluster_path.size() >= ext.size() &&
      cluster_path.compare(cluster_path.size() - ext.size(), ext.size(), ext) == 0) {
    return cluster_path.substr(0, cluster_path.size() - ext.size()) + ".twin.toml";
  }
  return cluster_path + ".twin.toml";
}

}  // namespace tessera::sim

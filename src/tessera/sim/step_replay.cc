#include "tessera/sim/step_replay.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tessera/sim/collective_cost.h"
#include "tessera/sim/toml_reader.h"

namespace tessera::sim {
namespace {

using step_detail::kCompute;
using step_detail::kStreams;
using step_detail::Stream;

struct Task {
  std::string name;
  int stage = 0;
  Stream stream = kCompute;
  double duration = 0;
  std::vector<int> deps;
  double start = -1, end = -1;
};

StatusOr<int> ReadCount(const TomlTable& t, const std::string& key, int64_t fallback) {
  TESSERA_ASSIGN_OR_RETURN(int64_t v, fallback < 0 ? t.Integer(key) : t.Integer(key, fallback));
  if (v < 1 || v > (int64_t{1} << 24)) return t.Error(key, fmt::format("must be in [1, 2^24], got {}", v));
  return static_cast<int>(v);
}

}  // namespace

double PlanSpec::StepFlops() const {
  const double b = global_batch, s = seq, h = hidden, l = layers;
  return 72 * b * s * l * h * h * (1 + s / (6 * h)) + 6 * b * s * h * vocab;
}

double PlanSpec::Parameters() const { return 12.0 * layers * hidden * hidden + static_cast<double>(vocab) * hidden; }

StatusOr<PlanSpec> ParsePlanSpec(const std::string& toml_text, const std::string& source) {
  TESSERA_ASSIGN_OR_RETURN(toml::table root, ParseTomlText(toml_text, source));
  TomlTable t(root, source, "");
  PlanSpec p;
  TESSERA_ASSIGN_OR_RETURN(TomlTable m, t.Table("model"));
  TESSERA_ASSIGN_OR_RETURN(p.layers, ReadCount(m, "layers", -1));
  TESSERA_ASSIGN_OR_RETURN(p.hidden, ReadCount(m, "hidden", -1));
  TESSERA_ASSIGN_OR_RETURN(p.seq, ReadCount(m, "seq", -1));
  TESSERA_ASSIGN_OR_RETURN(p.vocab, ReadCount(m, "vocab", -1));
  TESSERA_ASSIGN_OR_RETURN(p.heads, ReadCount(m, "heads", std::max(1, p.hidden / 128)));
  if (p.hidden % p.heads != 0) return m.Error("heads", fmt::format("{} do not divide hidden {}", p.heads, p.hidden));
  TESSERA_RETURN_IF_ERROR(m.Finish());
  TESSERA_ASSIGN_OR_RETURN(TomlTable par, t.Table("parallel"));
  TESSERA_ASSIGN_OR_RETURN(p.dp, ReadCount(par, "dp", 1));
  TESSERA_ASSIGN_OR_RETURN(p.tp, ReadCount(par, "tp", 1));
  TESSERA_ASSIGN_OR_RETURN(p.pp, ReadCount(par, "pp", 1));
  TESSERA_ASSIGN_OR_RETURN(p.micro_batch, ReadCount(par, "micro_batch", 1));
  TESSERA_ASSIGN_OR_RETURN(p.global_batch, ReadCount(par, "global_batch", -1));
  TESSERA_ASSIGN_OR_RETURN(p.vpp, ReadCount(par, "vpp", 1));
  TESSERA_ASSIGN_OR_RETURN(std::string schedule, par.String("schedule", p.vpp > 1 ? "interleaved" : "1f1b"));
  if (schedule != "1f1b" && schedule != "gpipe" && schedule != "interleaved") {
    return par.Error("schedule", "must be 1f1b, gpipe or interleaved");
  }
  if ((schedule == "interleaved") != (p.vpp > 1)) return par.Error("schedule", "interleaved needs vpp > 1 and vice versa");
  p.one_f_one_b = schedule != "gpipe";
  TESSERA_ASSIGN_OR_RETURN(p.recompute, par.String("recompute", "none"));
  if (p.recompute != "none" && p.recompute != "selective" && p.recompute != "full") {
    return par.Error("recompute", "must be none, selective or full");
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t zero, par.Integer("zero", 0));
  if (zero < 0 || zero > 3) return par.Error("zero", fmt::format("must be 0..3, got {}", zero));
  p.zero = static_cast<int>(zero);
  TESSERA_ASSIGN_OR_RETURN(p.sequence_parallel, par.Bool("sequence_parallel", false));
  TESSERA_ASSIGN_OR_RETURN(p.flash_attention, par.Bool("flash_attention", false));
  TESSERA_ASSIGN_OR_RETURN(p.overlap_grad_reduce, par.Bool("overlap_grad_reduce", false));
  TESSERA_ASSIGN_OR_RETURN(std::string precision, par.String("precision", "bf16"));
  if (precision == "bf16") {
    p.precision = Precision::kBf16;
  } else if (precision == "fp8") {
    p.precision = Precision::kFp8;
  } else if (precision == "fp32") {
    p.precision = Precision::kFp32;
  } else {
    return par.Error("precision", "must be fp32, bf16 or fp8");
  }
  if (p.global_batch % (p.dp * p.micro_batch) != 0) {
    return par.Error("global_batch", fmt::format("{} is not a multiple of dp x micro_batch = {}", p.global_batch,
                                                 p.dp * p.micro_batch));
  }
  if (p.layers % p.pp != 0) return par.Error("pp", fmt::format("{} layers do not split into {} stages", p.layers, p.pp));
  TESSERA_RETURN_IF_ERROR(par.Finish());
  if (t.Has("efficiency")) {
    p.custom_efficiency = true;
    TESSERA_ASSIGN_OR_RETURN(TomlTable e, t.Table("efficiency"));
    TESSERA_ASSIGN_OR_RETURN(p.efficiency.max_efficiency, e.Number("max", p.efficiency.max_efficiency));
    TESSERA_ASSIGN_OR_RETURN(p.efficiency.half_work_flops, e.Number("half_work_gflop", 2.0));
    p.efficiency.half_work_flops *= 1e9;
    if (p.efficiency.max_efficiency <= 0 || p.efficiency.max_efficiency > 1) {
      return e.Error("max", "must be in (0, 1]");
    }
    TESSERA_RETURN_IF_ERROR(e.Finish());
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  return p;
}

StatusOr<PlanSpec> LoadPlanSpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open plan '{}'", path);
  std::ostringstream text;
  text << in.rdbuf();
  return ParsePlanSpec(text.str(), path);
}

namespace step_detail {

Status CheckPlanFits(const ClusterSpec& c, const PlanSpec& p) {
  const int d = c.supernode.devices;
  if (p.vpp > 1 || p.recompute != "none" || p.zero > 0 || p.sequence_parallel || p.flash_attention ||
      p.overlap_grad_reduce) {
    return InvalidArgument("this replay prices plain plans only (vpp 1, no recompute, ZeRO 0, no SP, flash attention "
                           "or overlapped reduction); the planner-priced replay (`tessera sim step` without --flows) "
                           "prices them all");
  }
  if (p.Devices() > c.TotalDevices()) {
    return InvalidArgument("plan needs {} devices (dp {} x tp {} x pp {}); cluster {} has {}", p.Devices(), p.dp, p.tp,
                           p.pp, c.name, c.TotalDevices());
  }
  if (p.tp > d || d % p.tp != 0) {
    return InvalidArgument("tp {} must divide the {} devices of a super-node (tensor parallelism stays inside one)",
                           p.tp, d);
  }
  const int dp_local = Stage(c, p, 0).dp_local;
  if ((p.dp + dp_local - 1) / dp_local > c.supernodes) {
    return InvalidArgument("dp {} at {} per super-node needs more than the {} super-nodes", p.dp, dp_local,
                           c.supernodes);
  }
  return Status::Ok();
}

StageWork Stage(const ClusterSpec& c, const PlanSpec& p, int stage) {
  StageWork w;
  w.layers = p.layers / p.pp;
  const double b = p.micro_batch, s = p.seq, h = p.hidden, v = p.vocab, bf = 2;
  const bool last = stage == p.pp - 1;
  // Per layer, per tp rank.
  const double f_layer = 24 * b * s * h * h * (1 + s / (6 * h)) / p.tp;
  const double w_layer = 12 * h * h * bf / p.tp;
  auto compute = [&](double flops, double bytes) {
    return RooflineTime(c.device, OpCost{flops, bytes, p.precision}, p.efficiency);
  };
  w.fwd_s = w.layers * compute(f_layer, w_layer) + (last ? compute(2 * b * s * h * v / p.tp, h * v * bf / p.tp) : 0);
  w.bwd_s = w.layers * compute(2 * f_layer, 2 * w_layer) +
            (last ? compute(4 * b * s * h * v / p.tp, 2 * h * v * bf / p.tp) : 0);
  w.act_bytes = b * s * h * bf;
  w.params = 12.0 * w.layers * h * h + ((stage == 0 || last) ? v * h : 0);
  w.grad_bytes = w.params * bf / p.tp;
  w.optimizer_s = 2 * 16 * w.params / p.tp / c.device.hbm_bw;
  // Data parallelism: dp ranks at stride tp; a super-node holds d/tp of them.
  w.dp_local = std::max(1, std::min(p.dp, c.supernode.devices / p.tp));
  return w;
}

std::vector<std::pair<int, bool>> ComputeOrder(const PlanSpec& p, int stage) {
  const int m = p.MicroBatches();
  std::vector<std::pair<int, bool>> order;
  const int warm = p.one_f_one_b ? std::min(p.pp - stage - 1, m) : m;
  for (int i = 0; i < warm; ++i) order.emplace_back(i, true);
  for (int i = 0; i < m - warm; ++i) {
    order.emplace_back(warm + i, true);
    order.emplace_back(i, false);
  }
  for (int i = m - warm; i < m; ++i) order.emplace_back(i, false);
  return order;
}

}  // namespace step_detail

StatusOr<StepResult> ReplayStep(const ClusterSpec& c, const PlanSpec& p) {
  using namespace step_detail;  // NOLINT
  TESSERA_RETURN_IF_ERROR(CheckPlanFits(c, p));
  const int d = c.supernode.devices;
  const int m = p.MicroBatches();
  const StageWork w0 = Stage(c, p, 0);
  const double tp_ar = p.tp > 1 ? EstimateCollective(c, CollectiveKind::kAllReduce, w0.act_bytes,
                                                     GroupLayout::Contiguous(c, p.tp)).time_s
                                : 0;
  const double tp_mb = 2 * w0.layers * tp_ar;  // per micro-batch and direction
  const bool p2p_local = static_cast<int64_t>(p.tp) * p.dp < d;
  const double p2p = EstimateP2P(c, w0.act_bytes, p2p_local);
  StepResult r;
  r.tp_comm_s = 2 * tp_mb * m;
  std::vector<Task> tasks;
  auto add = [&](std::string name, int stage, Stream stream, double dur, std::vector<int> deps) {
    tasks.push_back(Task{std::move(name), stage, stream, dur, std::move(deps)});
    return static_cast<int>(tasks.size()) - 1;
  };
  std::vector<std::vector<int>> fwd(p.pp, std::vector<int>(m)), bwd = fwd, send_f = fwd, send_b = fwd;
  std::vector<std::vector<int>> order(p.pp * kStreams);  // per stage and stream: task ids in issue order
  auto stream_of = [&](int stage, Stream st) -> std::vector<int>& { return order[stage * kStreams + st]; };
  // Create the tasks (dependencies on tasks of other stages are filled in below).
  for (int st = 0; st < p.pp; ++st) {
    const StageWork w = Stage(c, p, st);
    const bool last = st == p.pp - 1;
    for (int i = 0; i < m; ++i) {
      fwd[st][i] = add(fmt::format("F{}", i), st, kCompute, w.fwd_s + tp_mb, {});
      bwd[st][i] = add(fmt::format("B{}", i), st, kCompute, w.bwd_s + tp_mb, {fwd[st][i]});
      send_f[st][i] = last ? -1 : add(fmt::format("send F{}", i), st, kSendNext, p2p, {fwd[st][i]});
      send_b[st][i] = st == 0 ? -1 : add(fmt::format("send B{}", i), st, kSendPrev, p2p, {bwd[st][i]});
    }
  }
  for (int st = 0; st < p.pp; ++st) {
    const StageWork w = Stage(c, p, st);
    for (int i = 0; i < m; ++i) {
      if (st > 0) tasks[fwd[st][i]].deps.push_back(send_f[st - 1][i]);
      if (st < p.pp - 1) tasks[bwd[st][i]].deps.push_back(send_b[st + 1][i]);
    }
    std::vector<int>& comp = stream_of(st, kCompute);
    for (auto [i, is_fwd] : ComputeOrder(p, st)) {
      comp.push_back(is_fwd ? fwd[st][i] : bwd[st][i]);
      if (is_fwd && send_f[st][i] >= 0) stream_of(st, kSendNext).push_back(send_f[st][i]);
      if (!is_fwd && send_b[st][i] >= 0) stream_of(st, kSendPrev).push_back(send_b[st][i]);
    }
    // Gradients: all-reduce over dp after the last backward, then the optimizer.
    double ar = p.dp > 1 ? EstimateCollective(c, CollectiveKind::kAllReduce, w.grad_bytes,
                                              GroupLayout{p.dp, w.dp_local}).time_s
                         : 0;
    if (st == 0) r.dp_comm_s = ar;
    int ar_id = add("dp all-reduce", st, kDataParallel, ar, {comp.back()});
    stream_of(st, kDataParallel).push_back(ar_id);
    int opt = add("optimizer", st, kCompute, w.optimizer_s, {ar_id});
    comp.push_back(opt);
  }
  // List scheduling: each stream runs its tasks in order, each when its dependencies are done.
  std::vector<size_t> head(order.size(), 0);
  std::vector<double> free_at(order.size(), 0);
  size_t done = 0;
  while (done < tasks.size()) {
    bool progress = false;
    for (size_t q = 0; q < order.size(); ++q) {
      while (head[q] < order[q].size()) {
        Task& t = tasks[order[q][head[q]]];
        double ready = free_at[q];
        bool ok = true;
        for (int dep : t.deps) {
          if (tasks[dep].end < 0) {
            ok = false;
            break;
          }
          ready = std::max(ready, tasks[dep].end);
        }
        if (!ok) break;
        t.start = ready;
        t.end = ready + t.duration;
        free_at[q] = t.end;
        ++head[q];
        ++done;
        progress = true;
      }
    }
    if (!progress) return Internal("step replay deadlocked with {} of {} tasks done", done, tasks.size());
  }
  for (const Task& t : tasks) {
    r.step_time_s = std::max(r.step_time_s, t.end);
    r.trace.push_back(TraceEvent{t.name, t.stage, static_cast<int>(t.stream), t.start, t.end});
  }
  // Bubble: idle share of the busiest compute stream until the pipeline flush
  // (the last backward anywhere).
  double flush = 0;
  for (const Task& t : tasks) {
    if (t.stream == kCompute && t.name[0] == 'B') flush = std::max(flush, t.end);
  }
  for (int st = 0; st < p.pp; ++st) {
    double busy = 0;
    for (int id : stream_of(st, kCompute)) {
      if (tasks[id].name[0] != 'o') busy += tasks[id].duration;
    }
    if (busy > r.compute_s) {
      r.compute_s = busy;
      r.bubble_fraction = flush > 0 ? 1 - busy / flush : 0;
    }
  }
  r.mfu = p.StepFlops() / (p.Devices() * c.device.PeakFlops(p.precision) * r.step_time_s);
  return r;
}

}  // namespace tessera::sim

#include "tessera/plan/report.h"

#include <fmt/format.h>

namespace tessera::plan {
namespace {

std::string Gb(double bytes) { return fmt::format("{:.1f} GB", bytes / 1e9); }

std::string Duration(double s) {
  if (s < 120) return fmt::format("{:.3g} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 3 * 86400) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

std::string Percent(double f) { return fmt::format("{:.1f}%", 100 * f); }

void AppendCost(std::string& out, const RunCost& c) {
  out += fmt::format("cost for {:.3g} tokens on {:.0f} cards\n", c.tokens, c.devices);
  out += fmt::format("  failure-free       {} ({:.3g} card-hours)\n", Duration(c.failure_free_s),
                     c.ideal_card_hours);
  out += fmt::format("  job MTBF           {} (per-card MTBF / cards)\n", Duration(c.job_mtbf_s));
  out += fmt::format("  checkpoint         write {}, every {} (Young: sqrt(2 delta MTBF))\n",
                     Duration(c.checkpoint_write_s), Duration(c.checkpoint_interval_s));
  out += fmt::format("  expected failures  {:.1f}\n", c.expected_failures);
  out += fmt::format("  wall-clock         {}  goodput {} (Monte Carlo {})\n", Duration(c.wall_s), Percent(c.goodput),
                     Percent(c.simulated_goodput));
  out += fmt::format("  card-hours         {:.4g} ({:.3g} M)\n", c.card_hours, c.card_hours / 1e6);
}

}  // namespace

nlohmann::json ModelJson(const ModelSpec& m) {
  const ParamCounts c = CountParams(m);
  const FlopsPerToken f = ForwardFlopsPerToken(m);
  return {{"name", m.name},
          {"params", c.total},
          {"active_params", c.active},
          {"layers", m.layers},
          {"moe_layers", m.NumMoeLayers()},
          {"training_flops_per_token", f.Training()}};
}

nlohmann::json PlanJson(const ParallelPlan& p) {
  return {{"dp", p.dp},
          {"tp", p.tp},
          {"pp", p.pp},
          {"ep", p.ep},
          {"vpp", p.vpp},
          {"micro_batch", p.micro_batch},
          {"global_batch", p.global_batch},
          {"seq_len", p.seq_len},
          {"zero", p.zero},
          {"recompute", RecomputeName(p.recompute)},
          {"precision", PrecisionName(p.precision)},
          {"schedule", ScheduleName(p.schedule)},
          {"sequence_parallel", p.sequence_parallel},
          {"flash_attention", p.flash_attention},
          {"offload_optimizer", p.offload_optimizer},
          {"overlap_grad_reduce", p.overlap_grad_reduce},
          {"devices", p.Devices()},
          {"micro_batches", p.MicroBatches()}};
}

nlohmann::json BreakdownJson(const StepBreakdown& r) {
  const MemoryBreakdown& m = r.memory;
  return {{"step_time_s", r.step_time},
          {"tflops_per_device", r.tflops_per_device},
          {"mfu", r.mfu},
          {"hfu", r.hfu},
          {"tokens_per_s", r.tokens_per_s},
          {"bubble_fraction", r.bubble_fraction},
          {"comm_fraction", r.comm_fraction},
          {"model_flops_per_step", r.model_flops},
          {"hardware_flops_per_step", r.hardware_flops},
          {"time_s",
           {{"compute", r.compute},
            {"tp_comm", r.tp_comm},
            {"ep_comm", r.ep_comm},
            {"pp_comm", r.pp_comm},
            {"dp_comm", r.dp_comm},
            {"sync", r.sync},
            {"bubble", r.bubble},
            {"optimizer", r.optimizer}}},
          {"memory_bytes_per_device", m.Total()},
          {"memory",
           {{"weights", m.weights},
            {"gradients", m.gradients},
            {"optimizer", m.optimizer},
            {"activations", m.activations},
            {"workspace", m.workspace},
            {"host_offload", m.host},
            {"peak_pipeline_rank", m.rank},
            {"usable_capacity", r.memory_capacity}}},
          {"fits", r.fits}};
}

nlohmann::json RunCostJson(const RunCost& c) {
  return {{"tokens", c.tokens},
          {"devices", c.devices},
          {"failure_free_s", c.failure_free_s},
          {"wall_clock_s", c.wall_s},
          {"card_hours", c.card_hours},
          {"ideal_card_hours", c.ideal_card_hours},
          {"job_mtbf_s", c.job_mtbf_s},
          {"checkpoint_write_s", c.checkpoint_write_s},
          {"checkpoint_interval_s", c.checkpoint_interval_s},
          {"expected_failures", c.expected_failures},
          {"goodput", c.goodput},
          {"simulated_goodput", c.simulated_goodput}};
}

std::string FormatEvaluation(const ModelSpec& m, const sim::ClusterSpec& c, const ParallelPlan& p,
                             const StepBreakdown& r, const std::optional<RunCost>& cost) {
  const ParamCounts pc = CountParams(m);
  std::string out;
  out += fmt::format("model    {}: {:.4g} B parameters ({:.4g} B active), {} layers\n", m.name, pc.total / 1e9,
                     pc.active / 1e9, m.layers);
  out += fmt::format("cluster  {}: {} x {} ({:.0f} TF/s bf16, {})\n", c.name, p.Devices(), c.device.name,
                     c.device.peak_flops_bf16 / 1e12, Gb(c.device.hbm_bytes));
  out += fmt::format("plan     {}\n", p.ToString());
  out += fmt::format("step     {:.4g} s   {:.1f} TF/s per device   MFU {}   HFU {}   {:.4g} tokens/s\n",
                     r.step_time, r.tflops_per_device, Percent(r.mfu), Percent(r.hfu), r.tokens_per_s);
  out += fmt::format("time     compute {:.4g} s, tp {:.4g}, ep {:.4g}, pp {:.4g}, dp {:.4g}, {}bubble {:.4g}, "
                     "optimizer {:.4g}\n",
                     r.compute, r.tp_comm, r.ep_comm, r.pp_comm, r.dp_comm,
                     r.sync > 0 ? fmt::format("meetings {:.4g}, ", r.sync) : std::string(), r.bubble, r.optimizer);
  out += fmt::format("         bubble {} of the step, exposed communication {}\n", Percent(r.bubble_fraction),
                     Percent(r.comm_fraction));
  const MemoryBreakdown& mb = r.memory;
  out += fmt::format("memory   {} of {} usable per device ({}; pipeline rank {})\n", Gb(mb.Total()),
                     Gb(r.memory_capacity), r.fits ? "fits" : "DOES NOT FIT", mb.rank);
  out += fmt::format("         weights {}, gradients {}, optimizer {}, activations {}, workspace {}", Gb(mb.weights),
                     Gb(mb.gradients), Gb(mb.optimizer), Gb(mb.activations), Gb(mb.workspace));
  out += mb.host > 0 ? fmt::format("; host tier {}\n", Gb(mb.host)) : "\n";
  if (cost) AppendCost(out, *cost);
  return out;
}

std::string FormatSearch(const ModelSpec& m, const sim::ClusterSpec& c, const SearchOptions& o,
                         const SearchResult& s, const std::optional<RunCost>& best_cost) {
  std::string out = fmt::format("searched {} plans for {} on {} cards of {}: {} fit in memory ({:.3f} s)\n",
                                s.candidates, m.name, o.devices, c.name, s.feasible, s.wall_s);
  if (s.candidates == 0) {
    return out + "no plan decomposes these cards for this model and batch: dp must divide the global batch, tp "
                 "the heads (and kv heads, FFN), tp fit in a super-node, pp not exceed the layers\n";
  }
  if (s.top.empty()) return out + "no plan fits in memory: add devices, or allow offload\n";
  out += fmt::format("{:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>3} {:>4} {:>10} {:>5} {:>12} {:>10} {:>8} {:>7} {:>7} {:>8}\n",
                     "rank", "dp", "tp", "pp", "vpp", "ep", "mb", "zero", "recompute", "prec", "schedule",
                     "step_s", "TF/s", "MFU", "bubble", "mem_GB");
  for (size_t i = 0; i < s.top.size(); ++i) {
    const ParallelPlan& p = s.top[i].plan;
    const StepBreakdown& r = s.top[i].result;
    out += fmt::format("{:>4} {:>4} {:>4} {:>4} {:>4} {:>4} {:>3} {:>4} {:>10} {:>5} {:>12} {:>10.4g} {:>8.1f} {:>7} {:>7} {:>8.1f}\n",
                       i + 1, p.dp, p.tp, p.pp, p.vpp, p.ep, p.micro_batch,
                       fmt::format("{}{}", p.zero, p.offload_optimizer ? "+o" : ""), RecomputeName(p.recompute),
                       PrecisionName(p.precision), ScheduleName(p.schedule), r.step_time, r.tflops_per_device,
                       Percent(r.mfu), Percent(r.bubble_fraction), r.memory.Total() / 1e9);
  }
  out += "\nbest plan:\n";
  out += FormatEvaluation(m, c, s.top.front().plan, s.top.front().result, best_cost);
  return out;
}

nlohmann::json DvfsJson(const sim::StepDvfs& d) {
  return {{"nominal_step_s", d.nominal_step_s},
          {"throttled_step_s", d.step_s},
          {"mean_clock", d.mean_clock},
          {"utilization", d.utilization},
          {"temp_c", d.temp_c},
          {"throttled_fraction", d.throttled_fraction},
          {"power_w", d.power_w},
          {"energy_per_device_j", d.energy_per_device_j},
          {"energy_total_j", d.energy_total_j}};
}

}  // namespace tessera::plan

// `tessera sim calibrate [--out FILE] [--ranks N] [--ccl-perf FILE]
// [--sweep full|tiny] [--json]`: measures this machine — fp32 and bf16 peaks
// and STREAM triad from `tessera info`'s cache, host memory, generic sweeps
// of every autograd op kind of Tessera's transformer (calibrate_measure.h),
// the optimizer, the context probes, the meeting probe at 2, 4 and 8 ranks,
// and a 2-rank all-reduce sweep run as `tessera launch --nproc 2 --
// tessera ccl-perf allreduce` (or read from --ccl-perf FILE) — fits the twin
// constants (sim/calibrate.h) and writes the cluster spec FILE (N ranks
// sharing the cores, 1-64) and FILE's .twin.toml. Takes ~1 min (--sweep
// tiny: a few seconds, for tests).
// `tessera sim predict --cluster FILE CONFIG [--set k=v ...] [--json]`:
// the twin's step time and memory for a `tessera train` config (sim/twin.h).
// `tessera sim meeting-probe` (under `tessera launch`, run by calibrate):
// what each meeting of ranks amid compute costs.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "calibrate_measure.h"
#include "calibrate_probes.h"
#include "commands.h"
#include "tessera/base/logging.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/hal/topology.h"
#include "tessera/models/gpt.h"
#include "tessera/sim/calibrate.h"
#include "tessera/sim/cluster_spec.h"
#include "tessera/sim/twin.h"
#include "tessera/train/router_probe.h"
#include "tessera/train/train_config.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;

// The upper median of `v` (non-empty).
double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// `tessera sim meeting-probe`, run by `tessera sim calibrate` as a job of
// 1-thread ranks (2, 4 and 8 of them) under `tessera launch`: every rank runs
// forward + backward of the probe's blocks (BlockSteps) in alternating
// rounds, free-running and meeting its partner (ranks 2i and 2i+1) after
// every block's forward and backward with a one-element all-reduce (as
// ranks meet at every tp all-reduce, ep all-to-all or pp send). A round takes its slowest rank's
// time. Rank 0 prints "meeting_us X": (median lockstep round - median free
// round) / meetings per round: what each meeting inside a step costs
// beyond its transfer (skew between the ranks, handing the collective to
// the communication thread and waking the waiting rank on a busy core).
Status MeetingProbe(int rounds_per_kind) {
  hal::SetNumThreads(1);
  auto world = comm::Communicator::FromEnvironment();
  if (!world.ok()) return world.status().WithContext("joining the meeting probe job");
  comm::Communicator& c = **world;
  const models::GptConfig config = ProbeModelConfigs()[0];
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ProbeRank> probe, ProbeRank::Create(config, 4, 1 + c.rank()));
  const int kRounds = std::max(1, rounds_per_kind), kStepsPerRound = 6;
  const int meetings_per_round = kStepsPerRound * 2 * config.n_layers;
  // Ranks meet in pairs, as tensor-, expert- and pipeline-parallel
  // partners do (groups of 2 are what layouts on a few cores use).
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> pair, c.Split(c.rank() / 2, c.rank()));
  Status failed;
  auto meet = [&] {
    float one = 1;
    if (Status st = pair->AllReduce(&one, &one, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum); !st.ok()) {
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
    std::printf("comm_model %s\n", c.CostModelText().c_str());
    std::printf("free_round_ms %.3f\nlockstep_round_ms %.3f\nmeetings_per_round %d\nmeeting_us %.3f\n", 1e3 * free,
                1e3 * locked, meetings_per_round, 1e6 * std::max(0.0, locked - free) / meetings_per_round);
  }
  return c.Barrier();
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
  std::string sweep = "full";
  bool json = false;
};

// Host memory (MemTotal of /proc/meminfo), bytes; 0 when unreadable.
double HostMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

// Seconds per meeting of `ranks` 1-thread ranks (meeting-probe under
// launch); the world communicator's selector model into `comm_model`.
StatusOr<double> MeasureMeeting(int ranks, int rounds, std::string* comm_model) {
  TESSERA_ASSIGN_OR_RETURN(
      const std::string out,
      RunSelf(fmt::format("launch --nproc {} -- '{{bin}}' sim meeting-probe --rounds {}", ranks, rounds)));
  const size_t model_at = out.find("comm_model ");
  if (model_at == std::string::npos)
    return Internal("the meeting probe ({} ranks) printed no comm_model:\n{}", ranks, out);
  *comm_model = out.substr(model_at + 11, out.find('\n', model_at) - model_at - 11);
  const size_t at = out.find("meeting_us ");
  if (at == std::string::npos) return Internal("the meeting probe ({} ranks) printed no meeting_us:\n{}", ranks, out);
  return std::strtod(out.c_str() + at + 11, nullptr) * 1e-6;
}

Status Calibrate(const CalibrateArgs& a) {
  if (a.ranks < 1 || a.ranks > 64) return InvalidArgument("--ranks {} must be in 1-64", a.ranks);
  if (a.sweep != "full" && a.sweep != "tiny") return InvalidArgument("--sweep '{}' must be full or tiny", a.sweep);
  const SweepSize size = a.sweep == "tiny" ? SweepSize::kTiny : SweepSize::kFull;
  const auto t0 = Clock::now();
  const int cores = std::max(1, hal::MachineTopology().cores);
  hal::SetNumThreads(cores);
  const hal::PeakInfo& peak = hal::MachinePeak();
  sim::MachineCalibration c;
  c.cpu = peak.cpu_model;
  c.cores = cores;
  c.host_memory_bytes = HostMemoryBytes();
  if (!(c.host_memory_bytes > 0)) return Internal("cannot read MemTotal from /proc/meminfo");
  c.bf16_peak_flops = peak.bf16_flops;
  std::vector<std::string> report;
  TESSERA_ASSIGN_OR_RETURN(c.all, MeasureHostCalibration(cores, cores, peak, size, &report));
  TESSERA_ASSIGN_OR_RETURN(c.one, MeasureHostCalibration(1, cores, peak, size, &report));
  TESSERA_ASSIGN_OR_RETURN(c.context, MeasureSharedCoreContext(c.one, cores, size, &report));
  // Meetings at the job sizes runs use: as many ranks as cores, 2x and 4x.
  for (int ranks : {2, 4, 8}) {
    if (size == SweepSize::kTiny && ranks > 2) break;
    std::string model;
    TESSERA_ASSIGN_OR_RETURN(double s, MeasureMeeting(ranks, size == SweepSize::kTiny ? 1 : 8, &model));
    c.meeting.points.emplace_back(ranks, s);
    c.comm_models[ranks] = model;
    report.push_back(fmt::format("meeting probe, {} ranks: {:.1f} us per meeting", ranks, s * 1e6));
  }
  hal::SetNumThreads(cores);
  if (a.ccl_perf.empty()) {
    const std::string args = size == SweepSize::kTiny ? "allreduce -b 1M -e 16M -f 4 -n 5 -w 2 -c 0"
                                                      : "allreduce -b 1K -e 4M -f 4 -n 30 -w 5 -c 0";
    c.link_source = fmt::format("tessera launch --nproc {} -- tessera ccl-perf {}", c.link_ranks, args);
    // The fastest time per size over up to 3 sweeps: one stalled iteration
    // in a sweep's mean had made 16 MiB read no slower than 1 MiB.
    std::vector<sim::TransferSample> rows;
    StatusOr<sim::LinkFit> fit = InvalidArgument("no all-reduce sweep ran");
    for (int sweep = 1; sweep <= 3 && !fit.ok(); ++sweep) {
      TESSERA_ASSIGN_OR_RETURN(const std::string ccl,
                               RunSelf(fmt::format("launch --nproc {} -- '{{bin}}' ccl-perf {}", c.link_ranks, args)));
      TESSERA_ASSIGN_OR_RETURN(std::vector<sim::TransferSample> more, sim::ParseNcclTestsOutput(ccl));
      rows.insert(rows.end(), more.begin(), more.end());
      rows = sim::FastestPerSize(rows);
      fit = sim::FitAllReduceLink(rows, c.link_ranks);
      if (!fit.ok()) report.push_back(fmt::format("all-reduce sweep {}: {}", sweep, fit.status().message()));
    }
    TESSERA_ASSIGN_OR_RETURN(c.link, std::move(fit));
  } else {
    TESSERA_ASSIGN_OR_RETURN(const std::string ccl, ReadFile(a.ccl_perf));
    c.link_source = a.ccl_perf;
    TESSERA_ASSIGN_OR_RETURN(std::vector<sim::TransferSample> rows, sim::ParseNcclTestsOutput(ccl));
    TESSERA_ASSIGN_OR_RETURN(c.link, sim::FitAllReduceLink(sim::FastestPerSize(rows), c.link_ranks));
  }
  report.push_back(fmt::format("link: alpha {:.2f} us, beta {:.2f} GB/s, rms error {:.1f} %", c.link.alpha_s * 1e6,
                               c.link.beta_bytes_per_s / 1e9, 100 * c.link.rms_rel_error));
  c.measure_seconds = std::chrono::duration<double>(Clock::now() - t0).count();

  const std::string spec_text = sim::MachineClusterToml(c, a.ranks);
  TESSERA_RETURN_IF_ERROR(sim::ParseClusterSpec(spec_text, a.out).status());
  const std::string twin_text = sim::TwinToml(c);
  TESSERA_RETURN_IF_ERROR(sim::ParseTwinToml(twin_text, sim::TwinPathFor(a.out)).status());
  const std::string twin_path = sim::TwinPathFor(a.out);
  for (const auto& [path, text] : {std::pair{a.out, spec_text}, std::pair{twin_path, twin_text}}) {
    std::ofstream f(path);
    f << text;
    if (!f.flush()) return Internal("cannot write '{}'", path);
  }
  if (a.json) {
    auto host = [](const sim::HostCalibration& h) {
      return nlohmann::json{{"threads", h.threads},
                            {"peak_gflops", h.peak_flops / 1e9},
                            {"triad_gbyte_s", h.triad_bytes_per_s / 1e9},
                            {"linear_rms_rel_error", h.linear.rms_rel_error},
                            {"attention_rms_rel_error", h.attention.rms_rel_error},
                            {"context_factor", h.context_factor},
                            {"autograd_op_us", h.autograd_op_s * 1e6}};
    };
    nlohmann::json j = {{"cluster", a.out},
                        {"twin", twin_path},
                        {"cpu", c.cpu},
                        {"cores", c.cores},
                        {"ranks", a.ranks},
                        {"sweep", a.sweep},
                        {"all", host(c.all)},
                        {"one", host(c.one)},
                        {"link_alpha_us", c.link.alpha_s * 1e6},
                        {"link_beta_gbyte_s", c.link.beta_bytes_per_s / 1e9},
                        {"link_rms_rel_error", c.link.rms_rel_error},
                        {"fits", report},
                        {"measure_seconds", c.measure_seconds}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    for (const std::string& line : report) std::printf("# %s\n", line.c_str());
    std::printf("wrote %s (%d ranks) and %s in %.1f s\n", a.out.c_str(), a.ranks, twin_path.c_str(), c.measure_seconds);
  }
  return Status::Ok();
}

struct PredictArgs {
  std::string cluster = "configs/clusters/this-machine.toml";
  std::string config;
  std::vector<std::string> overrides;
  bool json = false;
  bool balanced_experts = false;
};

Status Predict(const PredictArgs& a) {
  TESSERA_ASSIGN_OR_RETURN(train::TrainConfig config, train::TrainConfig::Load(a.config, a.overrides));
  if (config.parallel.schedule != "1f1b") {
    return InvalidArgument("sim predict: the twin models the 1f1b schedule, not parallel.schedule = '{}'",
                           config.parallel.schedule);
  }
  if (config.parallel.precision != "fp32") {
    return InvalidArgument("sim predict: the twin models fp32 training, not parallel.precision = '{}'",
                           config.parallel.precision);
  }
  TESSERA_ASSIGN_OR_RETURN(sim::MachineCalibration c, sim::LoadTwinToml(sim::TwinPathFor(a.cluster)));
  TESSERA_ASSIGN_OR_RETURN(sim::ClusterSpec spec, sim::LoadClusterSpec(a.cluster));
  sim::TwinModel model = TwinModelOf(config.model);
  const parallel::ParallelConfig& p = config.parallel;
  // Expert parallelism: how unevenly the config's data routes, measured by
  // training its first steps on one process (train/router_probe.h) — when
  // the twin says that fits in half the host memory and a minute.
  constexpr int kProbeSteps = 16;
  bool probe = !a.balanced_experts && p.ep > 1 && config.model.moe.num_experts > 0;
  std::string probe_skipped;  // why balanced routing was assumed instead (JSON too)
  if (probe) {
    sim::TwinRun one{.global_batch = config.train.global_batch, .micro_batch = config.train.micro_batch};
    TESSERA_ASSIGN_OR_RETURN(sim::TwinPrediction alone, sim::PredictTrainStep(c, spec, model, one));
    const double probe_s = alone.step_s * static_cast<double>(std::min<int64_t>(config.train.steps, kProbeSteps));
    if (alone.peak_memory_bytes > c.host_memory_bytes / 2 || probe_s > 60) {
      probe_skipped = fmt::format(
          "the router probe would need {:.1f} GB and {:.0f} s on one process; balanced MoE routing assumed (the "
          "expert-parallel memory and time are then a lower bound)",
          alone.peak_memory_bytes / 1e9, probe_s);
      std::fprintf(stderr, "sim predict: %s\n", probe_skipped.c_str());
      probe = false;
    }
  }
  if (probe) {
    auto load = train::ProbeExpertLoad(config, kProbeSteps);
    if (!load.ok()) return load.status().WithContext("sim predict: the router probe");
    for (const train::ExpertLoad& l : *load) {
      model.expert_load.push_back(l.mean);
      model.expert_peak_load.push_back(l.peak);
    }
  }
  sim::TwinRun run{.global_batch = config.train.global_batch,
                   .micro_batch = config.train.micro_batch,
                   .dp = p.dp,
                   .tp = p.tp,
                   .pp = p.pp,
                   .ep = p.ep,
                   .zero = p.zero,
                   .sequence_parallel = p.sequence_parallel && p.tp > 1,
                   // The single-process trainer does not recompute (tessera train warns).
                   .recompute = !p.is_parallel()             ? sim::Recompute::kNone
                                : p.recompute == "full"      ? sim::Recompute::kFull
                                : p.recompute == "selective" ? sim::Recompute::kSelective
                                                             : sim::Recompute::kNone};
  TESSERA_ASSIGN_OR_RETURN(sim::TwinPrediction r, sim::PredictTrainStep(c, spec, model, run));
  // The router probe's figures per MoE layer (expert parallelism only).
  nlohmann::json routing = nlohmann::json::array();
  for (size_t i = 0; i < model.expert_load.size(); ++i) {
    if (!config.model.IsMoeLayer(static_cast<int>(i))) continue;
    routing.push_back({{"layer", i}, {"mean_load", model.expert_load[i]}, {"peak_load", model.expert_peak_load[i]}});
  }
  if (a.json) {
    nlohmann::json j = nlohmann::json::parse(sim::TwinPredictionJson(r));
    if (!routing.empty()) j["router_probe"] = routing;
    if (!probe_skipped.empty()) j["router_probe_skipped"] = probe_skipped;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", sim::DescribeTwinPrediction(r).c_str());
    for (const auto& l : routing) {
      std::printf("router probe: layer %d busiest ep rank %.2fx the balanced rows (mean), up to %.2fx in flight\n",
                  l["layer"].get<int>(), l["mean_load"].get<double>(), l["peak_load"].get<double>());
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterSimCalibrateCommand(CLI::App& app) {
  CLI::App* sim = app.get_subcommand("sim");
  auto cargs = std::make_shared<CalibrateArgs>();
  CLI::App* cal = sim->add_subcommand("calibrate", "measure this machine and write its cluster spec (the twin)");
  cal->add_option("--out", cargs->out, "cluster spec TOML to write (the twin constants go to FILE's .twin.toml)");
  cal->add_option("--ranks", cargs->ranks, "ranks sharing the cores that the spec models (devices, 1-64)");
  cal->add_option("--sweep", cargs->sweep, "full (default) or tiny (a few points per op kind, for tests)");
  cal->add_option("--ccl-perf", cargs->ccl_perf, "read the all-reduce sweep from this ccl-perf output instead");
  cal->add_flag("--json", cargs->json, "print one JSON object");
  cal->callback([cargs] { ExitWith(Calibrate(*cargs)); });
  auto pargs = std::make_shared<PredictArgs>();
  CLI::App* pred = sim->add_subcommand("predict", "the twin's step time for a `tessera train` config here");
  pred->add_option("config", pargs->config, "training config TOML")->required();
  pred->add_option("--cluster", pargs->cluster, "calibrated cluster spec (with its .twin.toml)");
  pred->add_option("--set", pargs->overrides, "override a config key (section.key=value)");
  pred->add_flag("--json", pargs->json, "print one JSON object");
  pred->add_flag("--balanced-experts", pargs->balanced_experts,
                 "assume balanced MoE routing instead of probing the config's router on its data");
  pred->callback([pargs] { ExitWith(Predict(*pargs)); });
  CLI::App* probe = sim->add_subcommand(
      "meeting-probe", "(run by calibrate under tessera launch) what a collective amid compute costs each rank");
  auto rounds = std::make_shared<int>(8);
  probe->add_option("--rounds", *rounds, "free-running and lockstep rounds each");
  probe->callback([rounds] { ExitWith(MeetingProbe(*rounds)); });
}
TESSERA_CLI_COMMAND(81, RegisterSimCalibrateCommand);

}  // namespace tessera::cli

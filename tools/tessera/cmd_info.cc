// `tessera info [--json] [--remeasure]`: what this binary is and what it runs
// on — build, devices and their memory tiers, topology, ISA features, chosen
// kernels, the measured peak FLOP/s and memory bandwidth (the MFU
// denominator), and every knob.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "commands.h"
#include "tessera/base/knobs.h"
#include "tessera/hal/cpu_features.h"
#include "tessera/hal/device.h"
#include "tessera/hal/peak.h"
#include "tessera/hal/threading.h"
#include "tessera/hal/topology.h"
#include "tessera/ops/matmul/gemm.h"

namespace tessera::cli {
namespace {

struct InfoArgs {
  bool json = false;
  bool remeasure = false;
};

constexpr const char* kMfuNote =
    "MFU is model FLOPs per second divided by the peak FLOP/s that `tessera info` measures for this machine and "
    "dtype.";

std::string Bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

nlohmann::json StatsJson(const hal::MemoryStats& s) {
  return {{"current_bytes", s.current_bytes}, {"peak_bytes", s.peak_bytes}, {"reserved_bytes", s.reserved_bytes},
          {"num_allocs", s.num_allocs},       {"num_os_allocs", s.num_os_allocs}};
}

std::string StatsText(const hal::MemoryStats& s) {
  return fmt::format("current {}, peak {}, reserved {}, {} allocs ({} from the OS)", Bytes(s.current_bytes),
                     Bytes(s.peak_bytes), Bytes(s.reserved_bytes), s.num_allocs, s.num_os_allocs);
}

nlohmann::json InfoJson(const hal::PeakInfo& peak) {
  nlohmann::json j;
  j["version"] = TESSERA_VERSION;
  j["build"] = {{"compiler", TESSERA_BUILD_COMPILER},
                {"build_type", TESSERA_BUILD_TYPE},
                {"cxx_flags", TESSERA_BUILD_CXX_FLAGS},
                {"sanitize", TESSERA_BUILD_SANITIZE}};

  hal::Device& cpu = hal::CpuDevice();
  j["devices"] = nlohmann::json::array(
      {{{"name", cpu.name()},
        {"kind", "cpu"},
        {"tiers",
         {{"device", StatsJson(cpu.allocator(hal::MemoryTier::kDevice).Stats())},
          {"host", StatsJson(cpu.allocator(hal::MemoryTier::kHost).Stats())}}}}});

  const hal::Topology& t = hal::MachineTopology();
  nlohmann::json numa = nlohmann::json::array();
  for (const hal::NumaNode& n : t.numa_nodes) {
    numa.push_back({{"os_index", n.os_index}, {"memory_bytes", n.memory_bytes}, {"pus", n.pus}});
  }
  nlohmann::json caches = nlohmann::json::array();
  for (const hal::CacheLevel& c : t.caches) {
    caches.push_back({{"level", c.level},
                      {"size_bytes", c.size_bytes},
                      {"line_bytes", c.line_bytes},
                      {"instances", c.instances},
                      {"pus_per_instance", c.pus_per_instance}});
  }
  j["topology"] = {{"source", t.source},     {"packages", t.packages}, {"cores", t.cores}, {"pus", t.pus},
                   {"total_memory_bytes", t.total_memory_bytes},  {"numa_nodes", numa}, {"caches", caches}};

  const hal::CpuFeatures& f = hal::GetCpuFeatures();
  j["cpu"] = {{"vendor", f.vendor},     {"model_name", f.model_name}, {"family", f.family},
              {"model", f.model},       {"stepping", f.stepping},     {"features", f.Names()}};
  j["threads"] = hal::NumThreads();
  j["kernels"] = {{"gemm", ops::GemmKernelName()},
                  {"gemm_bf16", ops::GemmBf16KernelName()},
                  {"gemm_int8", ops::GemmInt8KernelName()}};
  j["peak"] = {{"cpu_model", peak.cpu_model},
               {"threads", peak.threads},
               {"fp32_isa", peak.fp32_isa},
               {"bf16_isa", peak.bf16_isa},
               {"fp32_flops_per_core", peak.fp32_flops_per_core},
               {"fp32_flops", peak.fp32_flops},
               {"bf16_flops_per_core", peak.bf16_flops_per_core},
               {"bf16_flops", peak.bf16_flops},
               {"triad_bytes_per_s_per_core", peak.triad_bytes_per_s_per_core},
               {"triad_bytes_per_s", peak.triad_bytes_per_s},
               {"measure_seconds", peak.measure_seconds},
               {"from_cache", peak.from_cache},
               {"disturbed", peak.disturbed},
               {"cache_path", hal::PeakCachePath()},
               {"note", kMfuNote}};
  nlohmann::json knobs = nlohmann::json::array();
  for (const base::KnobBase* k : base::AllKnobs()) {
    knobs.push_back({{"name", k->name()},
                     {"value", k->ValueText()},
                     {"default", k->default_text()},
                     {"from_environment", k->EnvText().has_value()},
                     {"help", k->help()}});
  }
  j["knobs"] = knobs;
  return j;
}

std::string Indent(const std::string& text, const char* pad) {
  std::string out;
  bool at_line_start = true;
  for (char c : text) {
    if (at_line_start && c != '\n') out += pad;
    out += c;
    at_line_start = c == '\n';
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

std::string InfoText(const hal::PeakInfo& peak) {
  std::string out = fmt::format("tessera {}\n", TESSERA_VERSION);
  out += fmt::format("build:    {} {}, sanitizers {}\n          flags: {}\n", TESSERA_BUILD_COMPILER,
                     TESSERA_BUILD_TYPE, TESSERA_BUILD_SANITIZE, TESSERA_BUILD_CXX_FLAGS);
  hal::Device& cpu = hal::CpuDevice();
  out += "devices:\n";
  out += fmt::format("  {}  device tier: {}\n", cpu.name(), StatsText(cpu.allocator(hal::MemoryTier::kDevice).Stats()));
  out += fmt::format("  {}  host tier:   {}\n", std::string(cpu.name().size(), ' '),
                     StatsText(cpu.allocator(hal::MemoryTier::kHost).Stats()));
  out += "topology:\n" + Indent(hal::MachineTopology().ToString(), "  ");
  const hal::CpuFeatures& f = hal::GetCpuFeatures();
  out += fmt::format("cpu:      {} ({} family {} model {} stepping {})\n", f.model_name, f.vendor, f.family, f.model,
                     f.stepping);
  out += fmt::format("isa:      {}\n", f.ToString());
  out += fmt::format("threads:  {} (TESSERA_NUM_THREADS; 0 = one per core)\n", hal::NumThreads());
  out += fmt::format("kernels:  gemm {} / {} / {}\n", ops::GemmKernelName(), ops::GemmBf16KernelName(),
                     ops::GemmInt8KernelName());
  out += "peak:\n" + Indent(peak.ToString(), "  ");
  out += fmt::format("  {}\n", kMfuNote);
  out += "knobs:\n" + base::DescribeKnobs();
  return out;
}

Status RunInfo(const InfoArgs& args) {
  const hal::PeakInfo& peak = hal::MachinePeak(args.remeasure);
  const std::string text = args.json ? InfoJson(peak).dump(2) + "\n" : InfoText(peak);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return IoError("tessera info: cannot write to stdout");
  }
  return Status::Ok();
}

}  // namespace

void RegisterInfoCommand(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* cmd = app.add_subcommand("info", "Show build, devices, topology, ISA, kernels, measured peak and knobs");
  cmd->add_flag("--json", args->json, "print JSON instead of text");
  cmd->add_flag("--remeasure", args->remeasure, "measure peak FLOP/s and bandwidth again and update the cache");
  cmd->callback([args] { ExitWith(RunInfo(*args)); });
}
TESSERA_CLI_COMMAND(10, RegisterInfoCommand);

}  // namespace tessera::cli

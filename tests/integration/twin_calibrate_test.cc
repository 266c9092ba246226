// The twin's measurement code as a user runs it: `tessera sim calibrate
// --sweep tiny` (every measurement — op sweeps, optimizer, context probes,
// the meeting probe under `tessera launch`, the all-reduce sweep — at a
// few small sizes) writes a cluster spec and twin file that load, and
// `tessera sim predict` prices the default config from them at 1, 2 and
// 8 ranks (ranks that outnumber the cores). A truncated or damaged twin
// file is a clear error naming the file, never a crash or a silent default.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

std::string Default() { return std::string(TESSERA_SOURCE_DIR) + "/configs/train/default.toml"; }

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TwinCalibrate, TinySweepWritesSpecsThatPredictEveryLayout) {
  const std::string dir = FreshTempDir("twin-calibrate");
  const std::string spec = dir + "/machine.toml", twin = dir + "/machine.twin.toml";
  ProcResult cal = RunCommand({TESSERA_BIN, "sim", "calibrate", "--sweep", "tiny", "--ranks", "8", "--out", spec,
                               "--json"},
                              seconds(240));
  ASSERT_EQ(cal.exit_code, 0) << Diagnose(cal);
  const nlohmann::json report = nlohmann::json::parse(cal.out);
  EXPECT_EQ(report.at("ranks").get<int>(), 8);
  EXPECT_GT(report.at("one").at("context_factor").get<double>(), 0);
  EXPECT_GE(report.at("fits").size(), 10u);  // one line per fit: linear, attention, each op kind, probes, link
  ASSERT_TRUE(std::filesystem::exists(twin));
  const std::string twin_text = Slurp(twin);
  for (const char* key : {"linear_half_m", "attention_per_score_dim_ps", "[meeting]", "[context]", "[comm]",
                          "ranks_2 = \"size=2", "bf16_peak_gflops", "host_memory_gb"}) {
    EXPECT_NE(twin_text.find(key), std::string::npos) << key << "\n" << twin_text;
  }
  // The spec says what is measured and what is assumed, with sources.
  const std::string spec_text = Slurp(spec);
  EXPECT_NE(spec_text.find("Assumed"), std::string::npos) << spec_text;
  EXPECT_NE(spec_text.find("2407.21783"), std::string::npos) << spec_text;

  double single = 0;
  for (const auto& [sets, ranks] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{"parallel.dp=1", "parallel.tp=1", "parallel.pp=1", "parallel.ep=1"}, 1},
           {{"parallel.dp=2", "parallel.tp=1", "parallel.pp=1", "parallel.ep=2", "parallel.zero=3"}, 2},
           {{}, 8}}) {  // the config's own layout: dp 2 x tp 2 x pp 2, ep 2
    std::vector<std::string> argv = {TESSERA_BIN, "sim", "predict", "--cluster", spec, Default(), "--json"};
    for (const std::string& kv : sets) argv.insert(argv.end(), {"--set", kv});
    // Expert parallelism: the router probe trains the config's first steps
    // (2 here, to stay quick under the sanitizers).
    if (ranks > 1) argv.insert(argv.end(), {"--set", "train.steps=2"});
    ProcResult p = RunCommand(argv, seconds(120));
    ASSERT_EQ(p.exit_code, 0) << Diagnose(p);
    const nlohmann::json j = nlohmann::json::parse(p.out);
    EXPECT_EQ(j.at("ranks").get<int>(), ranks);
    if (ranks > 1) {  // both MoE layers of the default model probed
      ASSERT_TRUE(j.contains("router_probe")) << p.out;
      EXPECT_EQ(j.at("router_probe").size(), 2u);
      EXPECT_GE(j.at("expert_load").get<double>(), 1.0);
    }
    EXPECT_GT(j.at("step_time_s").get<double>(), 0);
    EXPECT_GT(j.at("peak_memory_bytes").get<double>(), j.at("activation_bytes").get<double>());
    if (ranks == 1) single = j.at("step_time_s").get<double>();
    if (ranks == 8) {
      EXPECT_GT(j.at("core_sharing_s").get<double>(), 0);  // 8 ranks on fewer cores
    }
  }
  EXPECT_GT(single, 0);

  // Damaged twin files: truncated, a key missing, garbage.
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"truncated", twin_text.substr(0, twin_text.size() / 2)},
      {"no [comm]", twin_text.substr(0, twin_text.find("[comm]"))},
      {"garbage", "\x01\x02 not toml ]]"}};
  for (const auto& [what, text] : damaged) {
    std::ofstream(twin) << text;
    ProcResult p = RunCommand({TESSERA_BIN, "sim", "predict", "--cluster", spec, Default()}, seconds(30));
    EXPECT_EQ(p.exit_code, 1) << what << "\n" << Diagnose(p);
    EXPECT_NE(p.err.find("error:"), std::string::npos) << what << "\n" << Diagnose(p);
    EXPECT_NE(p.err.find("machine.twin.toml"), std::string::npos) << what << "\n" << Diagnose(p);
  }
  std::filesystem::remove_all(dir);
}

// A layout the twin does not model is refused with the key named.
TEST(TwinCalibrate, UnmodelledLayoutsAreRefused) {
  ProcResult p = RunCommand({TESSERA_BIN, "sim", "predict", "--cluster",
                             std::string(TESSERA_SOURCE_DIR) + "/configs/clusters/this-machine.toml", Default(),
                             "--set", "parallel.schedule=gpipe"},
                            seconds(30));
  EXPECT_EQ(p.exit_code, 1) << Diagnose(p);
  EXPECT_NE(p.err.find("parallel.schedule"), std::string::npos) << Diagnose(p);
}

}  // namespace
}  // namespace tessera::testing

// `tessera graph dump` and `tessera train` in graph mode as a user runs them:
// the dump shows each segment before and after the passes (a fused GEMM
// epilogue, a recomputed node, an MoE block's attention half) and writes
// Graphviz files; a graph-mode run reports its replayed segments in
// summary.json and ends with the same loss as the eager run; bad settings
// are refused with the key named.
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

TEST(GraphCli, DumpShowsThePassesAndWritesDot) {
  const std::string dir = FreshTempDir("graph-dump");
  ProcResult r = RunCommand(
      {TESSERA_BIN, "graph", "dump", Default(), "--dot", dir, "--set", "train.graph_recompute_budget=0"}, seconds(300));
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  for (const char* want : {"=== segment blocks.0 ===", "--- before passes", "--- after passes", "Fused_Linear_Add",
                           "(recompute)", "bwd ", "=== segment blocks.1.attention ===", "memory plan: arena",
                           "inter-op schedule, forward:", "inter-op schedule, backward:", "LinearGrad | LinearGrad"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in\n" << r.out.substr(0, 4000);
  }
  for (const char* file : {"/blocks.0.before.dot", "/blocks.0.after.dot", "/head.after.dot"}) {
    std::ifstream in(dir + file);
    std::stringstream s;
    s << in.rdbuf();
    EXPECT_NE(s.str().find("digraph"), std::string::npos) << dir + file;
  }
  ProcResult missing = RunCommand({TESSERA_BIN, "graph", "dump", Default(), "--segment", "blocks.99"}, seconds(300));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no segment named 'blocks.99'"), std::string::npos) << Diagnose(missing);
}

TEST(GraphCli, TrainInGraphModeMatchesEagerAndReportsItsGraphs) {
  const std::string dir = FreshTempDir("graph-train");
  auto run = [&](const std::string& graph) {
    return RunCommand({TESSERA_BIN, "train", Default(), "--set", "parallel.dp=1", "--set", "parallel.tp=1", "--set",
                       "parallel.pp=1", "--set", "parallel.ep=1", "--set", "train.steps=12", "--set", "eval.every=0",
                       "--set", "train.graph=" + graph, "--set", "train.out_dir=\"" + dir + "/" + graph + "\""},
                      seconds(600));
  };
  ProcResult eager = run("false"), graph = run("true");
  ASSERT_EQ(eager.exit_code, 0) << Diagnose(eager);
  ASSERT_EQ(graph.exit_code, 0) << Diagnose(graph);
  EXPECT_NE(graph.out.find("graph mode: 6 of 6 segments run as graphs"), std::string::npos) << graph.out;
  auto summary = [&](const std::string& g) {
    std::ifstream in(dir + "/" + g + "/default/summary.json");
    return nlohmann::json::parse(in);
  };
  const nlohmann::json e = summary("false"), s = summary("true");
  EXPECT_NEAR(s.at("final_loss").get<double>(), e.at("final_loss").get<double>(),
              1e-5 * e.at("final_loss").get<double>());
  int replayed = 0;
  for (const auto& seg : s.at("parallel").at("graph_segments_rank0")) {
    if (seg.at("mode") == "graph" && seg.at("replays").get<int>() > 0) ++replayed;
  }
  EXPECT_EQ(replayed, 6) << s.at("parallel").at("graph_segments_rank0").dump(1);
  // Refused with the key named.
  ProcResult dropout = RunCommand({TESSERA_BIN, "train", Default(), "--set", "train.graph=true", "--set",
                                   "model.dropout=0.1", "--set", "train.steps=1"},
                                  seconds(120));
  EXPECT_EQ(dropout.exit_code, 1);
  EXPECT_NE(dropout.err.find("train.graph = true needs model.dropout = 0"), std::string::npos) << Diagnose(dropout);
}

}  // namespace
}  // namespace tessera::testing

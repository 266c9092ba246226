// End-to-end checks of `tessera train` as a user runs it: a short run writes
// its records; bad input (unknown key, wrong type, malformed file, missing
// data file, bad --set) ends with exit code 1 and an "error:" line naming
// what and where — never a crash.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

struct Result {
  int exit_code;
  std::string output;
};

Result RunTessera(const std::string& args) {
  std::string cmd = std::string(TESSERA_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

class CliTrain : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/tessera_cli_testXXXXXX";
    dir_ = mkdtemp(name);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& file, const std::string& text) {
    std::string p = dir_ + "/" + file;
    std::ofstream(p) << text;
    return p;
  }
  std::string Default() const { return std::string(TESSERA_SOURCE_DIR) + "/configs/train/default.toml"; }
  // The default config on one process (it is laid out for 8 ranks).
  std::string DefaultSingle() const {
    return Default() + " --set parallel.dp=1 --set parallel.tp=1 --set parallel.pp=1 --set parallel.ep=1";
  }
  std::string dir_;
};

TEST_F(CliTrain, ShortDefaultRunWritesRecords) {
  Result r = RunTessera("train " + DefaultSingle() + " --plain --set train.steps=3 --set eval.samples=8 " +
                        "--set train.out_dir=" + dir_ + "/runs");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3/3"), std::string::npos) << r.output;
  std::ifstream f(dir_ + "/runs/default/summary.json");
  ASSERT_TRUE(f.good());
  nlohmann::json s = nlohmann::json::parse(f);
  EXPECT_EQ(s["steps"], 3);
  EXPECT_GT(s["tokens_per_s"].get<double>(), 0);
}

TEST_F(CliTrain, BadInputsAreClearErrors) {
  struct Case {
    std::string args;
    std::string needle;
  };
  std::string unknown = Write("unknown.toml", "[train]\nstpes = 5\n");
  std::string wrong_type = Write("type.toml", "[train]\nsteps = \"five\"\n");
  std::string malformed = Write("bad.toml", "[train\nsteps = 5\n");
  const Case cases[] = {
      {"train " + unknown, "unknown config key 'train.stpes'"},
      {"train " + unknown, "did you mean 'train.steps'"},
      {"train " + wrong_type, "type.toml:2"},
      {"train " + malformed, "malformed config file"},
      {"train " + dir_ + "/missing.toml", "missing.toml"},
      {"train " + DefaultSingle() +
           " --set data.kind=text --set data.path=/no/such/corpus.txt --set model.vocab_size=256",
       "/no/such/corpus.txt"},
      {"train " + Default(), "has 8 ranks but the job has 1"},
      {"train " + Default(), "tessera launch --nproc 8"},
      {"train " + Default() + " --set model.n_heads=3", "n_heads"},
      {"train " + Default() + " --set train.steps", "key=value"},
  };
  for (const Case& c : cases) {
    Result r = RunTessera(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find("error:"), std::string::npos) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.needle), std::string::npos) << c.args << "\n" << r.output;
  }
}

TEST_F(CliTrain, TruncatedShardIsDataLoss) {
  std::string shard = Write("tokens.bin", std::string(1023, 'x'));  // odd length: not whole uint16 tokens
  Result r = RunTessera("train " + DefaultSingle() + " --set data.kind=shards --set data.format=uint16 --set data.path=" + shard);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("DataLoss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens.bin"), std::string::npos) << r.output;
}

TEST_F(CliTrain, DefaultConfigTrainsOnEightRanks) {
  // What `make run` does, for a few steps: 8 processes (dp 2 x tp 2 x pp 2,
  // ep 2), rank 0 reporting, records with per-rank figures, the HTML report
  // and a trace of one step across all ranks.
  Result r = RunTessera("launch --nproc 8 -- " + std::string(TESSERA_BIN) + " train " + Default() +
                        " --plain --trace --set train.steps=3 --set eval.samples=16 --set train.out_dir=" + dir_ +
                        "/runs");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 0] step 3/3"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[rank 1] step"), std::string::npos) << "only rank 0 reports progress\n" << r.output;
  std::ifstream f(dir_ + "/runs/default/summary.json");
  ASSERT_TRUE(f.good());
  nlohmann::json s = nlohmann::json::parse(f);
  EXPECT_EQ(s["steps"], 3);
  const nlohmann::json& p = s["parallel"];
  EXPECT_EQ(p["world_size"], 8);
  ASSERT_EQ(p["ranks"].size(), 8u);
  for (const auto& rank : p["ranks"]) {
    EXPECT_GT(rank["peak_memory_bytes"].get<int64_t>(), 0);
    EXPECT_GT(rank["parameters_bytes"].get<int64_t>(), 0);
    EXPECT_GT(rank["optimizer_state_bytes"].get<int64_t>(), 0);
  }
  EXPECT_GT(p["bubble_fraction"].get<double>(), 0.0) << "two pipeline stages idle part of each step";
  EXPECT_GE(p["comm_fraction"].get<double>(), 0.0);
  std::ifstream html(dir_ + "/runs/default/report.html");
  std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("rank 7"), std::string::npos) << "memory and timeline rows for every rank";
  std::ifstream trace_file(dir_ + "/runs/default/trace.json");
  ASSERT_TRUE(trace_file.good());
  nlohmann::json trace = nlohmann::json::parse(trace_file);
  std::set<int> pids;
  int sends_or_waits = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    pids.insert(e["pid"].get<int>());
    if (e["cat"] == "comm") ++sends_or_waits;
  }
  EXPECT_EQ(pids.size(), 8u);
  EXPECT_GT(sends_or_waits, 0);
}

}  // namespace

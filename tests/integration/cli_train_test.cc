// End-to-end checks of `tessera train` as a user runs it: a short run writes
// its records; bad input (unknown key, wrong type, malformed file, missing
// data file, bad --set) ends with exit code 1 and an "error:" line naming
// what and where — never a crash.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
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
  std::string dir_;
};

TEST_F(CliTrain, ShortDefaultRunWritesRecords) {
  Result r = RunTessera("train " + Default() + " --plain --set train.steps=3 --set eval.samples=8 --set train.out_dir=" +
                 dir_ + "/runs");
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
      {"train " + Default() + " --set data.kind=text --set data.path=/no/such/corpus.txt --set model.vocab_size=256",
       "/no/such/corpus.txt"},
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
  Result r = RunTessera("train " + Default() + " --set data.kind=shards --set data.format=uint16 --set data.path=" + shard);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("DataLoss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens.bin"), std::string::npos) << r.output;
}

}  // namespace

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/train/config_schema.h"
#include "tessera/train/trainer.h"

namespace tessera::train {
namespace {

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/tessera_train_testXXXXXX";
    path_ = mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& file, const std::string& text) const {
    std::string p = path_ + "/" + file;
    std::ofstream(p) << text;
    return p;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

constexpr char kTinyConfig[] = R"(
name = "tiny"
[model]
vocab_size = 16
seq_len = 24
n_layers = 2
d_model = 32
n_heads = 2
d_ff = 64
rope = true
[model.moe]
num_experts = 2
top_k = 1
every = 2
normalize_top_k = false
[data]
kind = "arithmetic"
digits = 1
[train]
steps = 4
micro_batch = 8
global_batch = 16
lr = 1e-2
warmup_steps = 2
log_every = 1
[eval]
every = 2
samples = 16
batch = 8
)";

TEST(TrainConfig, LoadsAndOverrides) {
  TempDir dir;
  std::string path = dir.Write("c.toml", kTinyConfig);
  auto c = TrainConfig::Load(path, {"train.steps=7", "model.norm=rmsnorm", "train.lr=0.5"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->train.steps, 7);
  EXPECT_EQ(c->model.norm, models::NormKind::kRmsNorm);
  EXPECT_DOUBLE_EQ(c->train.lr, 0.5);
  EXPECT_EQ(c->model.moe.num_experts, 2);
  EXPECT_EQ(c->accumulation_steps(), 2);
  nlohmann::json j = c->ToJson();
  EXPECT_EQ(j["train"]["steps"], 7);
  EXPECT_EQ(j["model"]["norm"], "rmsnorm");
}

TEST(TrainConfig, ClearErrors) {
  TempDir dir;
  auto expect_error = [&](const std::string& text, const std::vector<std::string>& overrides,
                          const std::string& needle) {
    std::string path = dir.Write("e.toml", text);
    auto c = TrainConfig::Load(path, overrides);
    ASSERT_FALSE(c.ok()) << "expected an error mentioning " << needle;
    EXPECT_NE(c.status().ToString().find(needle), std::string::npos) << c.status().ToString();
  };
  expect_error(std::string(kTinyConfig) + "\n[extra]\nstpes = 3\n", {}, "unknown config key 'extra.stpes'");
  expect_error(kTinyConfig, {"train.stpes=3"}, "did you mean 'train.steps'");
  expect_error("[train]\nsteps = \"many\"\n", {}, "'train.steps'");
  expect_error("[train]\nsteps = \"many\"\n", {}, "e.toml:2");  // file and line
  expect_error("[train\nsteps = 3\n", {}, "malformed config file");
  expect_error(kTinyConfig, {"train.global_batch=12"}, "multiple of train.micro_batch");
  expect_error(kTinyConfig, {"model.n_heads=3"}, "n_heads");
  expect_error(kTinyConfig, {"model.norm=batchnorm"}, "batchnorm");
  expect_error(kTinyConfig, {"data.kind=text"}, "data.path is required");
  expect_error(kTinyConfig, {"nonsense"}, "key=value");
  auto missing = TrainConfig::Load(dir.path() + "/nope.toml", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(Trainer, MissingDataFileIsAClearError) {
  TempDir dir;
  std::string path = dir.Write("c.toml", kTinyConfig);
  auto c = TrainConfig::Load(path, {"data.kind=text", "data.path=[\"/no/such/corpus.txt\"]", "model.vocab_size=256"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto t = Trainer::Create(*c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("/no/such/corpus.txt"), std::string::npos);
}

TEST(Trainer, VocabTooSmallForData) {
  TempDir dir;
  auto c = TrainConfig::Load(dir.Write("c.toml", kTinyConfig), {"model.vocab_size=8"});
  ASSERT_TRUE(c.ok());
  auto t = Trainer::Create(*c);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("model.vocab_size"), std::string::npos);
}

TEST(Trainer, RunsAndRecords) {
  TempDir dir;
  auto c = TrainConfig::Load(dir.Write("c.toml", kTinyConfig), {"train.out_dir=" + dir.path() + "/runs"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  FILE* sink = std::fopen("/dev/null", "w");
  TrainerOptions opts;
  opts.out = sink;
  auto t = Trainer::Create(*c, opts);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  TrainSummary s;
  Status st = (*t)->Run(&s);
  std::fclose(sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(s.steps, 4);
  EXPECT_GT(s.tokens_per_s, 0);
  EXPECT_GT(s.mfu, 0);
  EXPECT_LT(s.mfu, 1);
  EXPECT_GT(s.peak_memory_bytes, 0);
  std::string run = dir.path() + "/runs/tiny";
  std::ifstream summary(run + "/summary.json");
  nlohmann::json j = nlohmann::json::parse(summary);
  for (const char* key : {"steps", "final_loss", "eval_loss", "eval_metric", "tokens_per_s", "mfu",
                          "peak_memory_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  std::ifstream metrics(run + "/metrics.jsonl");
  int step_rows = 0, eval_rows = 0;
  for (std::string line; std::getline(metrics, line);) {
    nlohmann::json row = nlohmann::json::parse(line);
    if (row.contains("loss")) step_rows++;
    if (row.contains("eval_loss")) eval_rows++;
  }
  EXPECT_EQ(step_rows, 4);
  EXPECT_EQ(eval_rows, 2);
  EXPECT_TRUE(std::filesystem::exists(run + "/config.json"));
}

TEST(Trainer, LearnsFromTheOperands) {
  // Ignoring the operands, the best possible loss on 1-digit sums is the
  // entropy of the digits: (ln 10 + H(carry = 0.45)) / 2 ≈ 1.49 nats. A model
  // that trains correctly must get clearly below it: it reads the operands.
  TempDir dir;
  auto c = TrainConfig::Load(dir.Write("c.toml", kTinyConfig),
                             {"train.steps=200", "train.warmup_steps=10", "train.lr=3e-3", "model.d_model=64",
                              "model.d_ff=128", "eval.every=0", "eval.samples=32", "train.global_batch=16",
                              "train.micro_batch=16"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  FILE* sink = std::fopen("/dev/null", "w");
  TrainerOptions opts;
  opts.out = sink;
  opts.write_records = false;
  auto t = Trainer::Create(*c, opts);
  ASSERT_TRUE(t.ok());
  TrainSummary s;
  ASSERT_TRUE((*t)->Run(&s).ok());
  std::fclose(sink);
  EXPECT_LT(s.final_loss_avg10, 1.3) << "initial loss is ln 16 ≈ 2.77";
  EXPECT_LT(s.eval.loss, 1.45) << "held-out pairs too";
}

}  // namespace
}  // namespace tessera::train

namespace tessera::train {
namespace {

TEST(Trainer, DivergenceIsAnErrorNotGarbage) {
  TempDir dir;
  auto c = TrainConfig::Load(dir.Write("c.toml", kTinyConfig),
                             {"train.steps=40", "train.lr=1e4", "train.min_lr=0", "train.grad_clip=0",
                              "train.warmup_steps=0", "train.out_dir=" + dir.path() + "/runs"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  FILE* sink = std::fopen("/dev/null", "w");
  TrainerOptions opts;
  opts.out = sink;
  auto t = Trainer::Create(*c, opts);
  ASSERT_TRUE(t.ok());
  Status st = (*t)->Run(nullptr);
  std::fclose(sink);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("training loss became"), std::string::npos) << st.ToString();
  // The steps before the divergence stay on disk.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/runs/tiny/metrics.jsonl"));
}

}  // namespace
}  // namespace tessera::train

// Fault injection end to end: `tessera launch` (the agent) runs `tessera
// train` on 2 ranks; one rank is SIGKILLed after step k, SIGSTOPped (hung),
// replaced by a warm spare, or killed in the middle of writing a disk
// checkpoint. Each time the job finishes by itself, and its final
// checkpoint — parameters and optimizer state — is bitwise the one of the
// same run without a failure (training is deterministic and the step fixes
// the data order: no sample skipped or seen twice). events.jsonl says what
// failed, where the state came from and how many steps were lost.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "test_util.h"

namespace tessera {
namespace {

using std::chrono::milliseconds;
using testing::Diagnose;
using testing::OfKind;
using testing::ProcResult;
using testing::ReadEvents;
using testing::RunCommand;
namespace fs = std::filesystem;
namespace ck = parallel::checkpoint;

constexpr milliseconds kRunLimit(120000);

constexpr char kConfig[] = R"(
name = "recovery"
[model]
vocab_size = 16
seq_len = 20
n_layers = 2
d_model = 32
n_heads = 4
d_ff = 64
norm = "rmsnorm"
activation = "swiglu"
rope = true
tie_embeddings = true
dropout = 0.1
[model.moe]
num_experts = 4
top_k = 2
every = 2
d_ff_expert = 32
[data]
kind = "arithmetic"
digits = 2
[train]
steps = 8
micro_batch = 2
global_batch = 8
lr = 3e-3
warmup_steps = 1
grad_clip = 0.5
threads = 1
log_every = 1
[eval]
every = 0
samples = 16
batch = 8
[parallel]
dp = 2
ep = 2
zero = 1
[checkpoint]
every = 8
)";

struct Job {
  std::string dir;
  std::string config;
  bool keep = false;  // the reference's checkpoint outlives its Job

  explicit Job(const std::string& name) : dir(testing::FreshTempDir("recovery-" + name)) {
    config = dir + "/config.toml";
    std::ofstream(config) << kConfig;
  }
  ~Job() {
    std::error_code ec;
    if (!keep && !::testing::Test::HasFailure()) fs::remove_all(dir, ec);  // kept for a failure's post-mortem
  }
  std::string events() const { return dir + "/runs/recovery/events.jsonl"; }
  std::string final_checkpoint() const { return dir + "/ckpt/step-00000008"; }

  ProcResult Run(const std::vector<std::string>& launch_args, const std::vector<std::string>& sets,
                 const std::map<std::string, std::string>& env = {}) const {
    std::vector<std::string> argv = {TESSERA_BIN, "launch", "--nproc", "2", "--events", events()};
    argv.insert(argv.end(), launch_args.begin(), launch_args.end());
    argv.insert(argv.end(), {"--", TESSERA_BIN, "train", config, "--set", "train.out_dir=\"" + dir + "/runs\"", "--set",
                             "checkpoint.dir=\"" + dir + "/ckpt\"", "--set",
                             "checkpoint.memory_dir=\"" + dir + "/mem\""});
    for (const std::string& s : sets) argv.insert(argv.end(), {"--set", s});
    return RunCommand(argv, kRunLimit, env);
  }
};

// Every tensor of two checkpoints, byte for byte.
void ExpectSameState(const std::string& a, const std::string& b) {
  auto ra = ck::CheckpointReader::Open(a);
  auto rb = ck::CheckpointReader::Open(b);
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  ASSERT_EQ(ra->index().tensors.size(), rb->index().tensors.size());
  int differ = 0;
  for (const auto& [name, t] : ra->index().tensors) {
    auto x = ra->ReadTensor(name);
    auto y = rb->ReadTensor(name);
    ASSERT_TRUE(x.ok() && y.ok()) << name;
    if (x->bytes != y->bytes && differ++ < 5) ADD_FAILURE() << name << " differs from the run without a failure";
  }
  EXPECT_EQ(differ, 0);
}

const std::string& Reference() {
  static const std::string ckpt = [] {
    Job job("reference");
    job.keep = true;
    ProcResult r = job.Run({}, {});
    EXPECT_EQ(r.exit_code, 0) << Diagnose(r);
    return job.final_checkpoint();
  }();
  return ckpt;
}

nlohmann::json Recovered(const Job& job, const ProcResult& r) {
  const auto rec = OfKind(ReadEvents(job.events()), "recovered");
  EXPECT_EQ(rec.size(), 1u) << Diagnose(r);
  return rec.empty() ? nlohmann::json::object() : rec[0];
}

TEST(Recovery, SigkilledRankRestoresFromMemoryAndFinishesBitwiseIdentical) {
  Job job("kill");
  ProcResult r = job.Run({"--max-restarts", "1", "--heartbeat-timeout", "10"}, {"checkpoint.memory_every=1"},
                         {{"TESSERA_INJECT_KILL_STEP", "4"}, {"TESSERA_INJECT_RANK", "1"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  ExpectSameState(Reference(), job.final_checkpoint());
  const auto failures = OfKind(ReadEvents(job.events()), "failure");
  ASSERT_EQ(failures.size(), 1u) << Diagnose(r);
  EXPECT_EQ(failures[0].value("cause", ""), "killed by SIGKILL");
  const nlohmann::json e = Recovered(job, r);
  EXPECT_EQ(e.value("source", ""), "memory") << e.dump();
  EXPECT_EQ(e.value("restored_step", -1), 4) << e.dump();
  EXPECT_EQ(e.value("steps_lost", -1), 0) << e.dump();
  EXPECT_LT(e.value("recovery_s", 1e9), 10.0) << e.dump();
}

TEST(Recovery, HungRankIsFoundByItsHeartbeatAndTheJobFinishesBitwiseIdentical) {
  Job job("stop");
  ProcResult r = job.Run({"--max-restarts", "1", "--heartbeat-timeout", "2", "--grace", "1"},
                         {"checkpoint.memory_every=1"},
                         {{"TESSERA_INJECT_STOP_STEP", "3"}, {"TESSERA_INJECT_RANK", "1"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  ExpectSameState(Reference(), job.final_checkpoint());
  const auto failures = OfKind(ReadEvents(job.events()), "failure");
  ASSERT_EQ(failures.size(), 1u) << Diagnose(r);
  EXPECT_EQ(failures[0].value("cause", "").rfind("silent ", 0), 0u) << failures[0].dump();
  EXPECT_EQ(Recovered(job, r).value("source", ""), "memory");
}

TEST(Recovery, WarmSpareTakesTheKilledRanksPlace) {
  Job job("spare");
  ProcResult r = job.Run({"--max-restarts", "1", "--spares", "1", "--heartbeat-timeout", "10"},
                         {"checkpoint.memory_every=1"},
                         {{"TESSERA_INJECT_KILL_STEP", "5"}, {"TESSERA_INJECT_RANK", "1"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  ExpectSameState(Reference(), job.final_checkpoint());
  const auto assigned = OfKind(ReadEvents(job.events()), "spare_assigned");
  ASSERT_EQ(assigned.size(), 1u) << Diagnose(r);
  EXPECT_EQ(assigned[0].value("rank", -1), 1);
  EXPECT_EQ(Recovered(job, r).value("restored_step", -1), 5);
}

TEST(Recovery, KillDuringADiskSaveFallsBackToThePreviousCheckpoint) {
  // Disk checkpoints every 2 steps, no memory tier; rank 1 dies while the
  // step-6 checkpoint is being written (its shard there, no index): the
  // restart uses step 4, recomputes 5 and 6, and nothing good is lost.
  Job job("torn");
  ProcResult r = job.Run({"--max-restarts", "1", "--heartbeat-timeout", "10"}, {"checkpoint.every=2"},
                         {{"TESSERA_INJECT_KILL_IN_SAVE_STEP", "6"}, {"TESSERA_INJECT_RANK", "1"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  ExpectSameState(Reference(), job.final_checkpoint());
  const nlohmann::json e = Recovered(job, r);
  EXPECT_EQ(e.value("source", ""), "disk") << e.dump();
  EXPECT_EQ(e.value("restored_step", -1), 4) << e.dump();
  EXPECT_GE(e.value("steps_lost", -1), 2) << e.dump();
  EXPECT_TRUE(fs::exists(job.dir + "/ckpt/step-00000004/index.json"));
}

TEST(Recovery, WithoutRestartsTheJobStopsWithTheFailure) {
  // The control: the same kill with --max-restarts 0 ends the job (so the
  // recoveries above are the agent's and the checkpoints', not luck).
  Job job("norestart");
  ProcResult r = job.Run({"--heartbeat-timeout", "10"}, {"checkpoint.memory_every=1"},
                         {{"TESSERA_INJECT_KILL_STEP", "4"}, {"TESSERA_INJECT_RANK", "1"}});
  EXPECT_NE(r.exit_code, 0) << Diagnose(r);
  EXPECT_FALSE(fs::exists(job.final_checkpoint()));
}

}  // namespace
}  // namespace tessera

// Recovery after a crash (ranks as threads; the agent's restart is
// simulated by running the job again with restart_count = 1): from the
// in-memory tier (no disk read, no step lost), from the next node's replica
// when a node's memory is gone, and from the disk tier when there is no
// memory snapshot. Every time the final parameters are bitwise those of the
// run that never crashed (training is deterministic, and the step fixes the
// data order and dropout masks: exactly once), and events.jsonl says where
// the state came from and how many steps were lost.
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "tessera/train/parity_test_util.h"
#include "tessera/train/report.h"
#include "tessera/train/run_record.h"

namespace tessera::train {
namespace {

using namespace parity;

struct Outcome {
  std::vector<double> losses;                         // rank 0
  std::map<std::string, std::vector<float>> params;   // "<rank>/<name>"
  Status status;                                      // rank 0's
};

Outcome RunJob(const std::vector<std::string>& overrides, int64_t crash_after, int restart_count, int ranks_per_node) {
  const TrainConfig config = Load(overrides);
  Outcome out;
  std::mutex mu;
  comm::testing::RunRanks(config.parallel.world_size(), comm::testing::TestOptions(),
                          [&](int rank, comm::Communicator& comm) {
                            ParallelTrainerOptions o;
                            o.base = QuietOptions();
                            o.base.write_records = true;
                            o.crash_after_step = crash_after;
                            o.restart_count = restart_count;
                            o.ranks_per_node = ranks_per_node;
                            auto trainer = ParallelTrainer::Create(config, comm, o);
                            ASSERT_TRUE(trainer.ok()) << "rank " << rank << ": " << trainer.status().ToString();
                            TrainSummary s;
                            Status st = (*trainer)->Run(&s);
                            std::lock_guard<std::mutex> lock(mu);
                            if (rank == 0) {
                              out.status = st;
                              out.losses = (*trainer)->losses();
                            }
                            if (!st.ok()) return;
                            auto params = (*trainer)->LocalParameters();
                            ASSERT_TRUE(params.ok());
                            for (auto& [name, t] : *params) out.params[std::to_string(rank) + "/" + name] = t.ToFloatVector();
                          });
  return out;
}

class Recovery : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("tessera_recovery_{}_{}", ::getpid(), ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::string> Config(int dp, const std::vector<std::string>& more) const {
    std::vector<std::string> o = {fmt::format("parallel.dp={}", dp), "parallel.zero=1", "train.steps=5",
                                  fmt::format("train.out_dir=\"{}\"", (dir_ / "runs").string()),
                                  fmt::format("checkpoint.dir=\"{}\"", (dir_ / "disk").string()),
                                  fmt::format("checkpoint.memory_dir=\"{}\"", (dir_ / "mem").string())};
    o.insert(o.end(), more.begin(), more.end());
    return o;
  }
  nlohmann::json LastEvent() const {
    nlohmann::json last;
    std::ifstream in(dir_ / "runs" / "parity" / "events.jsonl");
    for (std::string line; std::getline(in, line);) last = nlohmann::json::parse(line);
    return last;
  }
  // Crash after step 3, `between` (e.g. lose a node's memory), restart.
  void CrashAndRecover(int dp, int ranks_per_node, const std::vector<std::string>& more,
                       const std::function<void()>& between, const Outcome& reference) {
    const Outcome crashed = RunJob(Config(dp, more), /*crash_after=*/3, 0, ranks_per_node);
    ASSERT_EQ(crashed.status.code(), StatusCode::kAborted) << crashed.status.ToString();
    between();
    const Outcome resumed = RunJob(Config(dp, more), 0, /*restart_count=*/1, ranks_per_node);
    ASSERT_TRUE(resumed.status.ok()) << resumed.status.ToString();
    ASSERT_EQ(resumed.params.size(), reference.params.size());
    for (const auto& [key, v] : reference.params) EXPECT_EQ(resumed.params.at(key), v) << key << " differs";
    const size_t n = resumed.losses.size();
    ASSERT_GE(reference.losses.size(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(resumed.losses[i], reference.losses[reference.losses.size() - n + i]);
  }
  std::filesystem::path dir_;
};

TEST_F(Recovery, FromTheInMemorySnapshotWithNoStepLost) {
  const std::vector<std::string> more = {"checkpoint.memory_every=1"};
  const Outcome reference = RunJob(Config(2, more), 0, 0, 0);
  std::filesystem::remove_all(dir_ / "mem");
  std::filesystem::remove_all(dir_ / "runs");
  CrashAndRecover(2, 0, more, [] {}, reference);
  const nlohmann::json e = LastEvent();
  EXPECT_EQ(e["event"], "recovered") << e.dump();
  EXPECT_EQ(e["source"], "memory");
  EXPECT_EQ(e["restored_step"], 3);
  EXPECT_EQ(e["steps_lost"], 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "disk")) << "no disk tier was configured";
}

TEST_F(Recovery, TheReportShowsTheWholeCurveAndTheEvents) {
  // After a crash and a restart, report.html has every step's loss (the
  // first attempt's from metrics.jsonl) and the failure and the recovery
  // marked on the loss curve.
  const std::vector<std::string> more = {"checkpoint.memory_every=1"};
  const Outcome crashed = RunJob(Config(2, more), 3, 0, 0);
  ASSERT_EQ(crashed.status.code(), StatusCode::kAborted);
  const std::filesystem::path run = dir_ / "runs" / "parity";
  const Outcome resumed = RunJob(Config(2, more), 0, 1, 0);
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.ToString();
  ReportData data;
  data.steps.push_back({4, 1.0, 0, 0});
  AddRunHistory(run.string(), &data);
  ASSERT_EQ(data.steps.size(), 4u);
  EXPECT_EQ(data.steps.front().step, 1);
  ASSERT_EQ(data.markers.size(), 2u);  // where it stopped, where it resumed
  EXPECT_EQ(data.markers[1].label, "recovered from memory (0 lost)");
  std::ifstream in(run / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("Fault-tolerance events"), std::string::npos);
  EXPECT_NE(html.find("recovered from memory (0 lost)"), std::string::npos);
}

TEST_F(Recovery, FromTheNextNodesReplicaWhenANodesMemoryIsGone) {
  // 4 ranks as 2 nodes of 2: node 1's tmpfs folder vanishes with the crash;
  // its ranks' snapshots come from the replicas node 0 keeps.
  const std::vector<std::string> more = {"checkpoint.memory_every=1"};
  const Outcome reference = RunJob(Config(4, more), 0, 0, 2);
  std::filesystem::remove_all(dir_ / "mem");
  std::filesystem::remove_all(dir_ / "runs");
  CrashAndRecover(4, 2, more, [&] { std::filesystem::remove_all(dir_ / "mem" / "local" / "node-1"); }, reference);
  const nlohmann::json e = LastEvent();
  EXPECT_EQ(e["source"], "memory") << e.dump();
  EXPECT_NE(e["from"].get<std::string>().find("2 ranks from the next node's replica"), std::string::npos) << e.dump();
  EXPECT_EQ(e["steps_lost"], 0);
}

TEST_F(Recovery, FromDiskWhenNoMemorySnapshotIsLeft) {
  // Both tiers: memory every step, disk every 2. All memory lost: the disk
  // checkpoint of step 2 is used and step 3 is recomputed (1 step lost).
  const std::vector<std::string> more = {"checkpoint.memory_every=1", "checkpoint.every=2"};
  const Outcome reference = RunJob(Config(2, more), 0, 0, 0);
  for (const char* d : {"mem", "runs", "disk"}) std::filesystem::remove_all(dir_ / d);
  CrashAndRecover(2, 0, more, [&] { std::filesystem::remove_all(dir_ / "mem"); }, reference);
  const nlohmann::json e = LastEvent();
  EXPECT_EQ(e["source"], "disk") << e.dump();
  EXPECT_EQ(e["restored_step"], 2);
  EXPECT_EQ(e["steps_lost"], 1);
}

}  // namespace
}  // namespace tessera::train

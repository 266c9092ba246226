// Gradient verification (the algorithmic tier): the guard's verdicts, and
// under data parallelism (ranks as threads) a NaN in one rank's gradient and
// a silently flipped bit in one replica — detected, then skipped or rolled
// back to the last checkpoint and replayed. A rollback replays exactly: the
// final parameters are bitwise those of a run without the fault.
#include "tessera/train/gradient_guard.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "tessera/train/parity_test_util.h"

namespace tessera::train {
namespace {

using namespace parity;

TEST(GradientGuard, NonFiniteSpikeAndReplicaMismatch) {
  GuardOptions o;
  o.spike_factor = 5;
  o.spike_window = 8;
  GradientGuard g(o);
  std::string why;
  EXPECT_EQ(g.Check(std::numeric_limits<double>::quiet_NaN(), "", &why), GradientVerdict::kNonFinite);
  EXPECT_EQ(g.Check(std::numeric_limits<double>::infinity(), "", &why), GradientVerdict::kNonFinite);
  // No spike verdict before half a window of accepted norms.
  EXPECT_EQ(g.Check(1.0, "", &why), GradientVerdict::kOk);
  EXPECT_EQ(g.Check(100.0, "", &why), GradientVerdict::kOk) << "too early to judge";
  for (double n : {1.1, 0.9, 1.0, 1.2}) EXPECT_EQ(g.Check(n, "", &why), GradientVerdict::kOk);
  EXPECT_EQ(g.Check(6.0, "", &why), GradientVerdict::kSpike);
  EXPECT_NE(why.find("median"), std::string::npos) << why;
  EXPECT_EQ(g.Check(4.0, "", &why), GradientVerdict::kOk) << "4x the median is under the factor";
  EXPECT_EQ(g.Check(1.0, "bucket 'embed' differs", &why), GradientVerdict::kReplicaMismatch);
  EXPECT_EQ(why, "bucket 'embed' differs");
  GuardOptions off;
  GradientGuard g0(off);
  for (double n : {1.0, 1.0, 1.0, 1.0, 1e6}) EXPECT_EQ(g0.Check(n, "", &why), GradientVerdict::kOk);
}

struct FaultRun {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> params;  // rank 0's
  int64_t skipped = 0;
};

FaultRun RunWithFault(const std::vector<std::string>& overrides, int64_t nan_step, int64_t corrupt_step,
                      const std::filesystem::path& out) {
  const TrainConfig config = Load(overrides);
  FaultRun r;
  std::mutex mu;
  comm::testing::RunRanks(config.parallel.world_size(), comm::testing::TestOptions(),
                          [&](int rank, comm::Communicator& comm) {
                            ParallelTrainerOptions o;
                            o.base = QuietOptions();
                            o.base.write_records = !out.empty();
                            o.inject_nan_step = nan_step;
                            o.inject_corrupt_step = corrupt_step;
                            o.inject_rank = 1;
                            auto trainer = ParallelTrainer::Create(config, comm, o);
                            ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
                            TrainSummary s;
                            Status st = (*trainer)->Run(&s);
                            ASSERT_TRUE(st.ok()) << "rank " << rank << ": " << st.ToString();
                            auto params = (*trainer)->LocalParameters();
                            ASSERT_TRUE(params.ok());
                            std::lock_guard<std::mutex> lock(mu);
                            if (rank != 0) return;
                            r.losses = (*trainer)->losses();
                            r.skipped = s.skipped_steps;
                            for (auto& [name, t] : *params) r.params[name] = t.ToFloatVector();
                          });
  return r;
}

std::vector<nlohmann::json> Events(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir / "events.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class GuardedTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / fmt::format("tessera_guard_{}_{}", ::getpid(),
                                                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::vector<std::string> Overrides(const std::string& on_failure) const {
    // dp 4: the flipped replica is a minority of one, which the check names.
    return {"parallel.dp=4", "parallel.zero=1", "train.steps=5", "checkpoint.every=1",
            fmt::format("checkpoint.dir=\"{}\"", (dir_ / "ckpt").string()),
            fmt::format("train.out_dir=\"{}\"", dir_.string()), fmt::format("guard.on_failure=\"{}\"", on_failure)};
  }
  std::filesystem::path dir_;
};

TEST_F(GuardedTraining, NanInOneRanksGradientIsSkippedEverywhere) {
  // Checksums off: the NaN (on one replica only) must reach every rank's
  // verdict through the global norm. (With them on, the replica check
  // names it first — the next tests.)
  std::vector<std::string> o = Overrides("skip");
  o.push_back("guard.replica_checksum=false");
  const FaultRun r = RunWithFault(o, /*nan=*/3, 0, dir_);
  EXPECT_EQ(r.skipped, 1);
  ASSERT_EQ(r.losses.size(), 5u);
  for (double l : r.losses) EXPECT_TRUE(std::isfinite(l));
  for (const auto& [name, v] : r.params) {
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << name;
  }
  const auto events = Events(dir_ / "parity");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "step_skipped");
  EXPECT_EQ(events[0]["step"], 3);
  EXPECT_EQ(events[0]["reason"], "non-finite gradient");
}

TEST_F(GuardedTraining, FlippedBitInOneReplicaIsCaughtAndRolledBackExactly) {
  const FaultRun clean = RunWithFault(Overrides("rollback"), 0, 0, {});
  std::filesystem::remove_all(dir_);
  const FaultRun r = RunWithFault(Overrides("rollback"), 0, /*corrupt=*/3, dir_);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(r.losses, clean.losses) << "the replay from step 2 must be the uninterrupted run";
  ASSERT_EQ(r.params.size(), clean.params.size());
  for (const auto& [name, v] : clean.params) EXPECT_EQ(r.params.at(name), v) << name << " differs after the rollback";
  const auto events = Events(dir_ / "parity");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["event"], "rollback");
  EXPECT_EQ(events[0]["step"], 3);
  EXPECT_EQ(events[0]["to_step"], 2);
  EXPECT_NE(events[0]["reason"].get<std::string>().find("differs on group rank(s) 1"), std::string::npos)
      << events[0].dump();
}

TEST_F(GuardedTraining, WithoutTheChecksumTheCorruptionGoesUnnoticed) {
  // The control: the same flipped bit, replica checksums off — nothing is
  // skipped or rolled back (so the detection above is the checksum's).
  std::vector<std::string> o = Overrides("rollback");
  o.push_back("guard.replica_checksum=false");
  const FaultRun r = RunWithFault(o, 0, 3, dir_);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_TRUE(Events(dir_ / "parity").empty());
}

}  // namespace
}  // namespace tessera::train

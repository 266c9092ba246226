// Resharding: a checkpoint saved under one parallel layout loads under
// another — other world size, tp, pp (interleaved), ep, ZeRO stage, or the
// single-process Trainer — and training continues as if the layout had
// never changed: the losses of the steps after the resume match the
// uninterrupted single-process run's (fp32, 1e-5 relative, as the parity
// tests), and the final parameters match it too.
//
// The model has 8 layers (pp 4 × 2 virtual stages), 4 heads (tp 4) and 4
// experts (ep 2). Each case runs 4 steps saving every 2 steps, then resumes
// from step 2 under the other layout. A resume that loaded nothing, or
// loaded a tensor into the wrong place, would continue from other
// parameters and miss the losses by far more than the tolerance.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/train/checkpoint_layout.h"
#include "tessera/train/parity_test_util.h"

namespace tessera::train {
namespace {

using namespace parity;

struct Layout {
  std::string name;
  std::vector<std::string> overrides;  // empty: the single-process Trainer
};

void PrintTo(const Layout& l, std::ostream* os) { *os << l.name; }

const std::vector<std::string> kModel = {"model.n_layers=8", "train.steps=4"};

const Layout kBig{"dp2_tp2_pp2_ep2_zero1",
                  {"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.ep=2", "parallel.zero=1",
                   "parallel.sequence_parallel=true"}};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::filesystem::path Scratch(const std::string& name) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / fmt::format("tessera_reshard_{}_{}", ::getpid(), name);
  std::filesystem::remove_all(p);
  return p;
}

RunResult RunLayout(const Layout& layout, const std::vector<std::string>& extra) {
  const std::vector<std::string> o = With(With(kModel, layout.overrides), extra);
  if (!layout.overrides.empty()) return Parallel(o);
  RunResult r = SingleProcess(o);
  std::map<std::string, Tensor> keyed;  // as Parallel() keys them: "<name>#<tp rank>"
  for (auto& [name, t] : r.params) keyed[name + "#0"] = t;
  r.params = std::move(keyed);
  return r;
}

// The uninterrupted run (single process: every layout matches it).
const RunResult& Oracle() {
  static const RunResult r = SingleProcess(kModel);
  return r;
}

// Saves under `from` (every 2 steps into a fresh folder); returns the step-2 checkpoint.
std::filesystem::path SaveUnder(const Layout& from) {
  const std::filesystem::path root = Scratch(from.name);
  RunResult saved = RunLayout(from, {fmt::format("checkpoint.dir=\"{}\"", root.string()), "checkpoint.every=2"});
  ExpectMatches(Oracle(), saved, 1e-5, "saving run under " + from.name);
  const std::filesystem::path step2 = root / "step-00000002";
  EXPECT_TRUE(std::filesystem::exists(step2 / "index.json")) << step2;
  return step2;
}

void ResumeUnder(const Layout& to, const std::filesystem::path& ckpt, const std::string& what) {
  RunResult resumed = RunLayout(to, {fmt::format("checkpoint.resume=\"{}\"", ckpt.string())});
  RunResult tail = Oracle();
  tail.losses.erase(tail.losses.begin(), tail.losses.begin() + 2);  // steps 3 and 4
  ExpectMatches(tail, resumed, 1e-5, what);
  int tp = 1;
  for (const std::string& o : to.overrides) {
    if (o.rfind("parallel.tp=", 0) == 0) tp = std::stoi(o.substr(12));
  }
  ExpectParamsMatch(Oracle(), resumed, tp, what, 2e-5, 2e-4);
}

const std::filesystem::path& BigCheckpoint() {
  static const std::filesystem::path p = SaveUnder(kBig);
  return p;
}

class Resharding : public ::testing::TestWithParam<Layout> {};

TEST_P(Resharding, SavedUnderTheBigMeshContinuesUnderThisOne) {
  const Layout& to = GetParam();
  ResumeUnder(to, BigCheckpoint(), fmt::format("{} -> {}", kBig.name, to.name));
}

TEST_P(Resharding, SavedUnderThisOneContinuesUnderTheBigMesh) {
  const Layout& from = GetParam();
  ResumeUnder(kBig, SaveUnder(from), fmt::format("{} -> {}", from.name, kBig.name));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Resharding,
    ::testing::Values(Layout{"one_rank", {}}, Layout{"dp4_zero3", {"parallel.dp=4", "parallel.zero=3"}},
                      Layout{"tp4", {"parallel.tp=4"}},
                      Layout{"pp4_interleaved",
                             {"parallel.pp=4", "parallel.schedule=\"interleaved\"", "parallel.virtual_stages=2"}}),
    [](const ::testing::TestParamInfo<Layout>& info) { return info.param.name; });

TEST(ShardedCheckpoint, EveryRankWritesItsShardAndTheIndexTilesTheModelOnce) {
  // The big mesh's checkpoint: 8 shard files, and every parameter's
  // elements stored exactly once (the reader's Open validates the tiling).
  auto reader = parallel::checkpoint::CheckpointReader::Open(BigCheckpoint());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->index().files.size(), 8u);
  EXPECT_EQ(reader->metadata()["mesh"]["world_size"], 8);
  EXPECT_TRUE(reader->Verify().ok());
  int64_t model_elements = 0;
  for (const auto& [name, t] : reader->index().tensors) {
    if (name.rfind("model/", 0) != 0) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    model_elements += n;
  }
  auto single = models::Gpt::Create(Load(kModel).model);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(model_elements, (*single)->NumParameters());
}

TEST(ShardedCheckpoint, ConvertedToAnotherLayoutHasItsShardsAndContinuesExactly) {
  // `tessera ckpt convert --to`: the big mesh's step-2 checkpoint rewritten
  // for tp 4 (4 shard files, that mesh in the metadata) continues under tp 4
  // exactly as the original does.
  const std::filesystem::path out = Scratch("converted");
  auto done = ConvertCheckpointLayout(BigCheckpoint(), out, {"parallel.dp=1", "parallel.tp=4", "parallel.pp=1",
                                                             "parallel.ep=1", "parallel.zero=0"});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->world_size, 4);
  EXPECT_EQ(done->step, 2);
  auto reader = parallel::checkpoint::CheckpointReader::Open(out);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->index().files.size(), 4u);
  EXPECT_EQ(reader->metadata()["mesh"]["tp"], 4);
  ResumeUnder(Layout{"tp4", {"parallel.tp=4"}}, out, "converted to tp4, resumed under tp4");
  // A second conversion into the same place is refused (nothing overwritten).
  auto again = ConvertCheckpointLayout(BigCheckpoint(), out, {"parallel.tp=4"});
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
}

// parallel.dp = 0 (elastic): dp follows the job's size at each (re)start.
std::vector<double> ElasticRun(int world, const std::vector<std::string>& extra) {
  const TrainConfig config = Load(With(With(kModel, {"parallel.dp=0", "parallel.ep=2"}), extra));
  std::vector<double> losses;
  comm::testing::RunRanks(world, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    ParallelTrainerOptions o;
    o.base = QuietOptions();
    auto trainer = ParallelTrainer::Create(config, comm, o);
    ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
    EXPECT_EQ((*trainer)->mesh().shape().dp, world);
    TrainSummary s;
    ASSERT_TRUE((*trainer)->Run(&s).ok());
    if (rank == 0) losses = (*trainer)->losses();
  });
  return losses;
}

TEST(ShardedCheckpoint, ElasticDpShrinksAndGrowsWithTheSameGlobalBatch) {
  // Saved by 4 ranks (dp 4), continued by 2 (dp 2: twice the micro-batches
  // each, the same global batch and learning rates), as after losing a node.
  const std::filesystem::path root = Scratch("elastic");
  const std::vector<double> four = ElasticRun(4, {fmt::format("checkpoint.dir=\"{}\"", root.string()),
                                                  "checkpoint.every=2"});
  EXPECT_EQ(four.size(), 4u);
  const std::vector<double> two =
      ElasticRun(2, {fmt::format("checkpoint.resume=\"{}\"", (root / "step-00000002").string())});
  RunResult got;
  got.losses = two;
  RunResult tail = Oracle();
  tail.losses.erase(tail.losses.begin(), tail.losses.begin() + 2);
  ExpectMatches(tail, got, 1e-5, "dp 4 -> dp 2 (elastic)");
  auto bad = TrainConfig::Load(ConfigPath(), {"parallel.dp=0", "parallel.tp=3"});
  EXPECT_FALSE(bad.ok());
}

TEST(ShardedCheckpoint, LatestSkipsADamagedNewestCheckpoint) {
  // Saves after every step under dp 2 (ZeRO-2); step 4 is gone (as if the
  // run died before saving it) and step 3 has a flipped byte: "latest" must
  // fall back to step 2 and still continue exactly.
  const std::filesystem::path root = Scratch("latest");
  const Layout dp2{"dp2", {"parallel.dp=2", "parallel.zero=2"}};
  RunLayout(dp2, {fmt::format("checkpoint.dir=\"{}\"", root.string()), "checkpoint.every=1", "checkpoint.keep=3"});
  ASSERT_TRUE(std::filesystem::exists(root / "step-00000004" / "index.json"));
  std::filesystem::remove_all(root / "step-00000004");  // as if the run died before saving step 4
  const std::filesystem::path shard = root / "step-00000003" / "shard-00001-of-00002.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << shard;
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(shard) - 5));
    f.put('\x7f');
  }
  RunResult resumed =
      RunLayout(dp2, {fmt::format("checkpoint.dir=\"{}\"", root.string()), "checkpoint.resume=\"latest\""});
  RunResult tail = Oracle();
  tail.losses.erase(tail.losses.begin(), tail.losses.begin() + 2);
  ExpectMatches(tail, resumed, 1e-5, "resume latest after a damaged step 3");
}

}  // namespace
}  // namespace tessera::train

#include "tessera/train/image_trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <unistd.h>

#include <gtest/gtest.h>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/data/png_test_util.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"

namespace tessera::train {
namespace {

const std::string kConfig = std::string(TESSERA_SOURCE_DIR) + "/configs/train/resnet50.toml";

// The shipped config shrunk to seconds: bottleneck [1, 1], width 8, 12x12.
TrainConfig Tiny(std::vector<std::string> overrides) {
  std::vector<std::string> all = {"model.resnet.layers=[1, 1]",
                                  "model.resnet.width=8",
                                  "model.resnet.num_classes=4",
                                  "data.image_size=12",
                                  "data.image_noise=0.5",
                                  "data.image_shift=1",
                                  "train.micro_batch=8",
                                  "train.global_batch=16",
                                  "train.warmup_steps=2",
                                  "eval.samples=64",
                                  "eval.every=0",
                                  "train.threads=1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  auto c = TrainConfig::Load(kConfig, all);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

TrainerOptions Quiet() {
  TrainerOptions o;
  o.out = stderr;
  o.force_plain = true;
  o.write_records = false;
  return o;
}

TEST(ImageTraining, TheShippedConfigLoads) {
  auto c = TrainConfig::Load(kConfig, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->is_image_model());
  EXPECT_EQ(c->resnet.layers, (std::vector<int64_t>{3, 4, 6, 3}));
  EXPECT_TRUE(c->resnet.bottleneck);
  EXPECT_EQ(c->ToJson()["model"]["resnet"]["layout"], "NHWC");
  EXPECT_EQ(c->resnet.layout, ops::ImageLayout::kNHWC);
}

TEST(ImageTraining, LearnsTheSyntheticImages) {
  TrainConfig c = Tiny({"train.steps=60", "train.lr=5e-3"});
  TrainSummary s;
  Status st = RunImageTraining(c, nullptr, Quiet(), &s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(s.steps, 60);
  EXPECT_NEAR(s.chance_metric, 0.25, 1e-12);
  EXPECT_GT(s.eval.metric, 0.6) << "top-1 accuracy on held-out images";
  EXPECT_LT(s.final_loss_avg10, 0.6 * std::log(4.0));
  EXPECT_GT(s.tokens_per_s, 0.0);  // images/s
  EXPECT_GT(s.mfu, 0.0);
}

// train.graph: the model + loss is one captured graph (batch norm's running
// statistics updated in place by effect nodes); the run matches eager:
// every step's loss (through the average of the last ten), and the eval
// loss, which reads the running statistics.
TEST(ImageTraining, GraphModeMatchesEager) {
  TrainSummary eager, graphed;
  ASSERT_TRUE(RunImageTraining(Tiny({"train.steps=12", "eval.every=12"}), nullptr, Quiet(), &eager).ok());
  ASSERT_TRUE(
      RunImageTraining(Tiny({"train.steps=12", "eval.every=12", "train.graph=true"}), nullptr, Quiet(), &graphed).ok());
  EXPECT_NEAR(graphed.final_loss, eager.final_loss, 1e-5 * eager.final_loss);
  EXPECT_NEAR(graphed.final_loss_avg10, eager.final_loss_avg10, 1e-5 * eager.final_loss_avg10);
  EXPECT_NEAR(graphed.eval.loss, eager.eval.loss, 1e-5 * eager.eval.loss);
  ASSERT_TRUE(graphed.parallel.contains("graph_segments_rank0")) << graphed.parallel.dump(1);
  const auto& seg = graphed.parallel["graph_segments_rank0"].at(0);
  EXPECT_EQ(seg.at("mode"), "graph") << seg.dump(1);
  EXPECT_EQ(seg.at("replays").get<int>(), 12 * 2 - 2) << seg.dump(1);  // 2 micro-batches a step; capture, check
  EXPECT_FALSE(eager.parallel.contains("graph_segments_rank0"));
}

TEST(ImageTraining, DataParallelMatchesOneProcess) {
  // Same samples per micro-batch (so the same batch-norm statistics), the
  // gradient averaged over all micro-batches either way: equal losses.
  TrainConfig c = Tiny({"train.steps=3", "train.micro_batch=4"});
  std::vector<double> single;
  {
    TrainSummary s;
    TrainerOptions o = Quiet();
    ASSERT_TRUE(RunImageTraining(c, nullptr, o, &s).ok());
    single.push_back(s.final_loss);
    single.push_back(s.eval.loss);
  }
  std::mutex mu;
  std::vector<std::vector<double>> ranks(2);
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    TrainSummary s;
    Status st = RunImageTraining(c, &comm, Quiet(), &s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::lock_guard<std::mutex> lock(mu);
    ranks[rank] = {s.final_loss, s.eval.loss};
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].size(), 2u);
    EXPECT_NEAR(ranks[r][0], single[0], 1e-4 * std::fabs(single[0])) << "rank " << r << " last training loss";
  }
  EXPECT_EQ(ranks[0][1], ranks[1][1]);  // one evaluation, summed over ranks
}

std::filesystem::path FreshDir(const std::string& name) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_image_ckpt_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

// A run resumed from a mid-run checkpoint ends exactly where the
// uninterrupted run does: same parameters and optimizer state (final
// training loss, bitwise) and the same batch-norm running statistics
// (held-out loss, which uses them, bitwise).
TEST(ImageTraining, ResumesBitwiseFromACheckpoint) {
  const auto root = FreshDir("resume");
  const std::string dir = "checkpoint.dir=\"" + root.string() + "\"";
  TrainSummary whole;
  ASSERT_TRUE(RunImageTraining(Tiny({"train.steps=6", "checkpoint.every=2", dir}), nullptr, Quiet(), &whole).ok());
  EXPECT_EQ(whole.checkpoints, 3);
  const auto step4 = root / parallel::checkpoint::StepDirName(4);
  ASSERT_TRUE(std::filesystem::exists(step4));

  TrainSummary resumed;
  Status st = RunImageTraining(Tiny({"train.steps=6", dir, "checkpoint.resume=\"" + step4.string() + "\""}), nullptr,
                               Quiet(), &resumed);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(resumed.final_loss, whole.final_loss);
  EXPECT_EQ(resumed.eval.loss, whole.eval.loss);
  EXPECT_EQ(resumed.eval.metric, whole.eval.metric);

  // Resuming from a fresh start is a different run (the check can fail).
  TrainSummary fresh;
  ASSERT_TRUE(RunImageTraining(Tiny({"train.steps=2"}), nullptr, Quiet(), &fresh).ok());
  EXPECT_NE(fresh.final_loss, whole.final_loss);

  // A checkpoint at the last step leaves nothing to train: a clear error.
  st = RunImageTraining(Tiny({"train.steps=6", dir, "checkpoint.resume=\"latest\""}), nullptr, Quiet(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nothing left to train"), std::string::npos) << st.ToString();

  // A damaged checkpoint names itself; "latest" falls back past it.
  for (const auto& f : std::filesystem::directory_iterator(step4)) {
    if (f.path().extension() != ".json" && f.is_regular_file()) {
      std::filesystem::resize_file(f.path(), std::filesystem::file_size(f.path()) / 2);
    }
  }
  st = RunImageTraining(Tiny({"train.steps=6", dir, "checkpoint.resume=\"" + step4.string() + "\""}), nullptr, Quiet(),
                        nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find(step4.string()), std::string::npos) << st.ToString();
  std::filesystem::remove_all(root / parallel::checkpoint::StepDirName(6));
  TrainSummary fallback;
  st = RunImageTraining(Tiny({"train.steps=6", dir, "checkpoint.resume=\"latest\""}), nullptr, Quiet(), &fallback);
  ASSERT_TRUE(st.ok()) << st.ToString();  // from step 2, replaying 3..6
  EXPECT_EQ(fallback.final_loss, whole.final_loss);
  std::filesystem::remove_all(root);
}

// A checkpoint of another model is refused, naming what does not match.
TEST(ImageTraining, RefusesAnotherModelsCheckpoint) {
  const auto root = FreshDir("other");
  const std::string dir = "checkpoint.dir=\"" + root.string() + "\"";
  ASSERT_TRUE(RunImageTraining(Tiny({"train.steps=2", "checkpoint.every=2", dir}), nullptr, Quiet(), nullptr).ok());
  const auto step2 = root / parallel::checkpoint::StepDirName(2);
  Status st = RunImageTraining(
      Tiny({"train.steps=4", "model.resnet.width=16", dir, "checkpoint.resume=\"" + step2.string() + "\""}), nullptr,
      Quiet(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("mismatch"), std::string::npos) << st.ToString();
  std::filesystem::remove_all(root);
}

// A folder of PNG files (data.kind = "image_folder"): 3 classes of 20
// noisy solid-colour 12x12 images, every 5th held out.
TEST(ImageTraining, LearnsAnImageFolder) {
  const auto root = FreshDir("folder");
  data::testing::WriteColorFolder(root, {"blue", "green", "red"}, {{{40, 60, 200}}, {{50, 190, 60}}, {{210, 50, 40}}},
                                  20, 12, 12, 60);
  const std::vector<std::string> folder = {"data.kind=\"image_folder\"", "data.path=\"" + root.string() + "\"",
                                           "data.eval_every=5", "model.resnet.num_classes=3"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), folder.begin(), folder.end());
    return Tiny(more);
  };
  TrainSummary s;
  Status st = RunImageTraining(with({"train.steps=30", "train.lr=5e-3", "eval.samples=64"}), nullptr, Quiet(), &s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NEAR(s.chance_metric, 1.0 / 3, 1e-12);
  EXPECT_EQ(s.eval.samples, 12) << "the whole held-out split, each image once";
  EXPECT_GT(s.eval.metric, 0.8) << "top-1 accuracy on held-out images";
  EXPECT_LT(s.eval.loss, 0.5 * std::log(3.0));
  EXPECT_LT(s.final_loss_avg10, 0.5 * std::log(3.0));

  // The folder's class count must be the model's.
  st = RunImageTraining(with({"train.steps=1", "model.resnet.num_classes=4"}), nullptr, Quiet(), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("has 3 classes (blue, green, red)"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("model.resnet.num_classes = 4"), std::string::npos) << st.ToString();
  // A missing folder, a held-out folder with other classes.
  st = RunImageTraining(with({"train.steps=1", "data.path=\"" + root.string() + "/nope\""}), nullptr, Quiet(), nullptr);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  const auto val = FreshDir("folder_val");
  data::testing::WriteColorFolder(val, {"blue", "green", "yellow"}, {{{0, 0, 255}}, {{0, 255, 0}}, {{255, 255, 0}}}, 1,
                                  12, 12, 0);
  st = RunImageTraining(with({"train.steps=1", "data.eval_path=\"" + val.string() + "\""}), nullptr, Quiet(), nullptr);
  EXPECT_NE(st.message().find("class 'red' is only in"), std::string::npos) << st.ToString();
  // A corrupt image stops training with its name.
  std::ofstream(root / "green" / "img_03.png") << "this is not a PNG file";
  st = RunImageTraining(with({"train.steps=4"}), nullptr, Quiet(), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find((root / "green" / "img_03.png").string()), std::string::npos) << st.ToString();
  std::filesystem::remove_all(root);
  std::filesystem::remove_all(val);
}

// Every rank opens the folder itself; samples are addressed by global
// index, so two ranks see the single process's batches.
TEST(ImageTraining, ImageFolderDataParallelMatchesOneProcess) {
  const auto root = FreshDir("folder_dp");
  data::testing::WriteColorFolder(root, {"a", "b"}, {{{200, 20, 20}}, {{20, 20, 200}}}, 10, 12, 12, 80);
  TrainConfig c = Tiny({"data.kind=\"image_folder\"", "data.path=\"" + root.string() + "\"", "data.eval_every=5",
                        "model.resnet.num_classes=2", "train.steps=3", "train.micro_batch=4"});
  TrainSummary single;
  ASSERT_TRUE(RunImageTraining(c, nullptr, Quiet(), &single).ok());
  std::mutex mu;
  std::vector<double> losses(2, -1);
  comm::testing::RunRanks(2, comm::testing::TestOptions(), [&](int rank, comm::Communicator& comm) {
    TrainSummary s;
    Status st = RunImageTraining(c, &comm, Quiet(), &s);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::lock_guard<std::mutex> lock(mu);
    losses[rank] = s.final_loss;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(losses[r], single.final_loss, 1e-4 * std::fabs(single.final_loss)) << "rank " << r;
  }
  std::filesystem::remove_all(root);
}

TEST(ImageTraining, RejectsWhatItCannotRun) {
  auto bad = [](std::vector<std::string> o) {
    auto c = TrainConfig::Load(kConfig, o);
    EXPECT_FALSE(c.ok()) << "accepted " << o[0];
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_NE(bad({"parallel.tp=2"}).find("data-parallel only"), std::string::npos);
  EXPECT_NE(bad({"data.kind=\"arithmetic\""}).find("synthetic_images"), std::string::npos);
  EXPECT_NE(bad({"checkpoint.memory_every=10"}).find("disk checkpoints only"), std::string::npos);
  EXPECT_NE(bad({"model.resnet.layout=\"NWHC\""}).find("model.resnet.layout"), std::string::npos);
  EXPECT_NE(bad({"model.kind=\"cnn\""}).find("model.kind"), std::string::npos);
  EXPECT_NE(bad({"model.resnet.layers=[3, 0]"}).find("layers[1]"), std::string::npos);
  EXPECT_NE(bad({"data.kind=\"image_folder\""}).find("data.path must name one folder"), std::string::npos);
  EXPECT_NE(bad({"data.kind=\"image_folder\"", "data.path=[\"a\", \"b\"]"}).find("data.path must name one folder"),
            std::string::npos);
  EXPECT_NE(bad({"data.kind=\"image_folder\"", "data.path=\"d\"", "data.eval_every=1"}).find("data.eval_every"),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::train

// Sharded checkpoint round trips: whole tensors of every dtype, scalars,
// empty and larger tensors; 2-d and 3-d tensors split along each dim and in
// grids; ReadSlice of boxes that cross shard boundaries (resharding).
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_convert.h"
#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_root.h"
#include "tessera/parallel/checkpoint/checkpoint_test_util.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"

namespace tessera::parallel::checkpoint {
namespace {

using testing::AddTiled;
using testing::ExtractBox;
using testing::GridBoxes;
using testing::RandomBytes;
using testing::TempDir;

TEST(CheckpointRoundTrip, WholeTensorsOfEveryDtypeScalarsAndEmpty) {
  TempDir tmp;
  CheckpointWriter writer(3, /*step=*/42);
  ASSERT_TRUE(writer.SetMetadata({{"config", {{"lr", 0.001}}}, {"rng", {1, 2, 3}}}).ok());
  struct Expected {
    std::string name;
    StorageDtype dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::vector<Expected> expected;
  int seed = 0;
  for (StorageDtype dtype : kAllStorageDtypes) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 3}, {}, {0, 5}}) {
      Expected e{fmt::format("{}.{}", StorageDtypeName(dtype), expected.size()), dtype, shape, {}};
      e.bytes = RandomBytes(TensorByteSize({e.name, dtype, shape}), ++seed);
      expected.push_back(std::move(e));
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    const Expected& e = expected[i];
    const Status st = writer.AddTensor(e.name, e.dtype, e.shape, e.bytes.data(), static_cast<int>(i % 3));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  ASSERT_TRUE(writer.Commit(tmp / "ckpt").ok());

  for (const char* leftover : {"index.json.tmp", "shard-00001-of-00003.safetensors.tmp"}) {
    EXPECT_FALSE(std::filesystem::exists(tmp / "ckpt" / leftover)) << leftover;
  }
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp / "ckpt");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->step(), 42);
  EXPECT_EQ(reader->metadata()["config"]["lr"], 0.001);
  EXPECT_EQ(reader->index().files.size(), 3u);
  StatusOr<VerifyReport> report = reader->Verify();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->tensors, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(report->files, 3);
  for (const Expected& e : expected) {
    StatusOr<TensorData> t = reader->ReadTensor(e.name);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->dtype, e.dtype);
    EXPECT_EQ(t->shape, e.shape);
    EXPECT_EQ(t->bytes, e.bytes) << e.name;
  }
  // Each shard is a standard safetensors file carrying its place.
  StatusOr<SafetensorsFile> shard = SafetensorsFile::Open(tmp / "ckpt" / "shard-00002-of-00003.safetensors");
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->metadata().at("format"), "tessera-checkpoint");
  EXPECT_EQ(shard->metadata().at("shard_index"), "2");
  EXPECT_EQ(shard->metadata().at("shard_count"), "3");
}

// Saves a [rows, cols] tensor with each layout; reads it whole and every
// sub-box, comparing with the oracle.
TEST(CheckpointSharded, TwoDimsSplitAlongEachDimAndAGrid) {
  TempDir tmp;
  const std::vector<int64_t> shape = {6, 10};
  const std::vector<std::byte> data = RandomBytes(6 * 10 * 4, 7);
  const std::vector<std::vector<Box>> layouts = {
      GridBoxes({{0, 2, 4, 6}, {0, 10}}),      // rows
      GridBoxes({{0, 6}, {0, 4, 10}}),         // columns, uneven
      GridBoxes({{0, 3, 6}, {0, 7, 10}}),      // 2 x 2 grid
      GridBoxes({{0, 1, 6}, {0, 3, 5, 10}}),   // 2 x 3 grid on 2 shards (several slices per shard)
  };
  for (size_t l = 0; l < layouts.size(); ++l) {
    CheckpointWriter writer(l == 3 ? 2 : static_cast<int>(layouts[l].size()), 1);
    std::vector<std::vector<std::byte>> keep;
    ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kF32, shape, data, layouts[l], keep).ok());
    const auto dir = tmp / fmt::format("layout{}", l);
    ASSERT_TRUE(writer.Commit(dir).ok());
    StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    ASSERT_TRUE(reader->Verify().ok());
    EXPECT_EQ(reader->FindTensor("w")->slices.size(), layouts[l].size());
    StatusOr<TensorData> whole = reader->ReadTensor("w");
    ASSERT_TRUE(whole.ok());
    EXPECT_EQ(whole->bytes, data) << "layout " << l;
    for (int64_t r0 = 0; r0 <= 6; ++r0) {
      for (int64_t r1 = r0; r1 <= 6; ++r1) {
        for (int64_t c0 = 0; c0 <= 10; c0 += 1) {
          for (int64_t c1 = c0; c1 <= 10; c1 += 3) {
            const Box box{{r0, c0}, {r1 - r0, c1 - c0}};
            StatusOr<TensorData> part = reader->ReadSlice("w", box.offset, box.shape);
            ASSERT_TRUE(part.ok()) << part.status().ToString();
            ASSERT_EQ(part->bytes, ExtractBox(data, shape, box, 4))
                << "layout " << l << " box @" << r0 << "," << c0 << " " << r1 - r0 << "x" << c1 - c0;
          }
        }
      }
    }
  }
}

TEST(CheckpointSharded, ThreeDimsGridAndRandomBoxes) {
  TempDir tmp;
  const std::vector<int64_t> shape = {4, 6, 8};
  const std::vector<std::byte> data = RandomBytes(4 * 6 * 8 * 2, 11);
  CheckpointWriter writer(4, 9);
  std::vector<std::vector<std::byte>> keep;
  ASSERT_TRUE(AddTiled(writer, "experts", StorageDtype::kBF16, shape, data,
                       GridBoxes({{0, 2, 4}, {0, 1, 3, 6}, {0, 5, 8}}), keep)
                  .ok());
  ASSERT_TRUE(writer.Commit(tmp / "ckpt").ok());
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp / "ckpt");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE(reader->Verify().ok());
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    Box box;
    for (int64_t extent : shape) {
      const int64_t a = static_cast<int64_t>(rng() % (extent + 1)), b = static_cast<int64_t>(rng() % (extent + 1));
      box.offset.push_back(std::min(a, b));
      box.shape.push_back(std::max(a, b) - std::min(a, b));
    }
    StatusOr<TensorData> part = reader->ReadSlice("experts", box.offset, box.shape);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    ASSERT_EQ(part->bytes, ExtractBox(data, shape, box, 2)) << "case " << i;
  }
  // Loading into another layout (resharding): a 1 x 3 x 1 split along dim 1.
  for (const Box& box : GridBoxes({{0, 4}, {0, 2, 4, 6}, {0, 8}})) {
    StatusOr<TensorData> part = reader->ReadSlice("experts", box.offset, box.shape);
    ASSERT_TRUE(part.ok());
    EXPECT_EQ(part->bytes, ExtractBox(data, shape, box, 2));
  }
}

TEST(CheckpointSharded, ScalarsEmptyAndLargeTensorsAcrossShards) {
  TempDir tmp;
  const std::vector<std::byte> large = RandomBytes(4 << 20, 5);  // [1024, 1024] F32, 4 MiB
  const std::vector<std::byte> scalar = RandomBytes(8, 6);
  CheckpointWriter writer(4, 100);
  std::vector<std::vector<std::byte>> keep;
  ASSERT_TRUE(AddTiled(writer, "embed", StorageDtype::kF32, {1024, 1024}, large,
                       GridBoxes({{0, 256, 512, 768, 1024}, {0, 1024}}), keep)
                  .ok());
  ASSERT_TRUE(writer.AddTensor("loss_scale", StorageDtype::kF64, {}, scalar.data(), 3).ok());
  ASSERT_TRUE(writer.AddTensor("no_rows", StorageDtype::kI32, {0, 16}, nullptr, 1).ok());
  // An empty tensor stored as two empty slices.
  ASSERT_TRUE(writer.AddSlice({"empty2", StorageDtype::kU8, {3, 0}, {0, 0}, {2, 0}, nullptr, 0}).ok());
  ASSERT_TRUE(writer.AddSlice({"empty2", StorageDtype::kU8, {3, 0}, {2, 0}, {1, 0}, nullptr, 1}).ok());
  ASSERT_TRUE(writer.Commit(tmp / "ckpt").ok());
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp / "ckpt");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  StatusOr<VerifyReport> report = reader->Verify();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(report->bytes, 4u << 20);
  EXPECT_EQ(reader->ReadTensor("embed")->bytes, large);
  const Box crossing{{200, 100}, {400, 900}};  // rows 200..599: three shards
  EXPECT_EQ(reader->ReadSlice("embed", crossing.offset, crossing.shape)->bytes,
            ExtractBox(large, {1024, 1024}, crossing, 4));
  StatusOr<TensorData> s = reader->ReadTensor("loss_scale");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->bytes, scalar);
  EXPECT_EQ(reader->ReadTensor("no_rows")->bytes.size(), 0u);
  EXPECT_EQ(reader->ReadTensor("no_rows")->shape, (std::vector<int64_t>{0, 16}));
  EXPECT_TRUE(reader->ReadTensor("empty2").ok());
}

TEST(CheckpointSharded, ConcurrentReadersShareShards) {
  TempDir tmp;
  const std::vector<int64_t> shape = {64, 32};
  const std::vector<std::byte> data = RandomBytes(64 * 32 * 4, 8);
  CheckpointWriter writer(4);
  std::vector<std::vector<std::byte>> keep;
  ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kI32, shape, data, GridBoxes({{0, 16, 32, 48, 64}, {0, 32}}), keep)
                  .ok());
  ASSERT_TRUE(writer.Commit(tmp / "ckpt").ok());
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp / "ckpt");
  ASSERT_TRUE(reader.ok());
  std::vector<std::thread> threads;
  std::vector<int> good(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Box box{{t * 16 - (t > 0 ? 3 : 0), 0}, {16, 32}};  // crosses into the previous shard
      for (int i = 0; i < 20; ++i) {
        StatusOr<TensorData> part = reader->ReadSlice("w", box.offset, box.shape);
        good[t] += part.ok() && part->bytes == ExtractBox(data, shape, box, 4);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good, std::vector<int>(4, 20));
}

TEST(CheckpointConvert, MergeWritesOneStandardSafetensorsFile) {
  TempDir tmp;
  const std::vector<std::byte> w = RandomBytes(6 * 4 * 2, 12), b = RandomBytes(3 * 8, 13);
  CheckpointWriter writer(3, 250);
  ASSERT_TRUE(writer.SetMetadata({{"mesh", {{"dp", 2}, {"tp", 2}}}, {"name", "run-a"}}).ok());
  std::vector<std::vector<std::byte>> keep;
  ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kF16, {6, 4}, w, GridBoxes({{0, 3, 6}, {0, 2, 4}}), keep).ok());
  ASSERT_TRUE(AddTiled(writer, "b", StorageDtype::kI64, {3}, b, GridBoxes({{0, 1, 3}}), keep).ok());
  ASSERT_TRUE(writer.Commit(tmp / "ckpt").ok());
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp / "ckpt");
  ASSERT_TRUE(reader.ok());
  StatusOr<MergeReport> report = MergeToSafetensors(*reader, tmp / "merged.safetensors", false);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->tensors, 2);
  StatusOr<SafetensorsFile> merged = SafetensorsFile::Open(tmp / "merged.safetensors");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->file_size(), report->bytes);
  ASSERT_EQ(merged->tensors().size(), 2u);
  const auto bytes_of = [&](const char* name) {
    const auto span = merged->TensorBytes(*merged->Find(name));
    return std::vector<std::byte>(span.begin(), span.end());
  };
  EXPECT_EQ(merged->Find("w")->spec.shape, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(bytes_of("w"), w);
  EXPECT_EQ(bytes_of("b"), b);
  EXPECT_EQ(merged->metadata().at("format"), "pt");
  EXPECT_EQ(merged->metadata().at("tessera.step"), "250");
  EXPECT_EQ(merged->metadata().at("metadata.name"), "run-a");
  EXPECT_EQ(nlohmann::json::parse(merged->metadata().at("metadata.mesh"))["tp"], 2);
  EXPECT_EQ(MergeToSafetensors(*reader, tmp / "merged.safetensors", false).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(MergeToSafetensors(*reader, tmp / "merged.safetensors", true).ok());
}

TEST(CheckpointRoot, ListsLatestAndKeepsTheLastK) {
  TempDir tmp;
  const float x = 1;
  for (int64_t step : {3, 1, 20}) {
    CheckpointWriter writer(1, step);
    ASSERT_TRUE(writer.AddTensor("x", StorageDtype::kF32, {}, &x, 0).ok());
    ASSERT_TRUE(writer.Commit(tmp / StepDirName(step)).ok());
  }
  // Not checkpoints: half-written (no index.json), wrong names, a file.
  std::filesystem::create_directories(tmp / "step-00000030");
  testing::WriteFileBytes(tmp / "step-00000030" / "index.json.tmp", "{");
  std::filesystem::create_directories(tmp / "step-5");
  std::filesystem::copy(tmp / StepDirName(1), tmp / "step-000000001");
  std::filesystem::copy(tmp / StepDirName(1), tmp / "backup");
  testing::WriteFileBytes(tmp / "step-00000040", "a file");

  EXPECT_EQ(StepDirName(20), "step-00000020");
  EXPECT_EQ(ParseStepDirName("step-00000020"), 20);
  EXPECT_EQ(ParseStepDirName("step-123456789"), 123456789);
  EXPECT_FALSE(ParseStepDirName("step-0000020").has_value());
  StatusOr<std::vector<CheckpointEntry>> all = ListCheckpoints(tmp.path());
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].step, 1);
  EXPECT_EQ((*all)[2].step, 20);
  StatusOr<std::optional<CheckpointEntry>> latest = LatestCheckpoint(tmp.path());
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->dir, tmp / "step-00000020");

  EXPECT_EQ(KeepLastCheckpoints(tmp.path(), 0).status().code(), StatusCode::kInvalidArgument);
  StatusOr<std::vector<std::filesystem::path>> deleted = KeepLastCheckpoints(tmp.path(), 2);
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->size(), 1u);
  EXPECT_EQ((*deleted)[0], tmp / "step-00000001");
  EXPECT_FALSE(std::filesystem::exists(tmp / "step-00000001"));
  for (const char* kept : {"step-00000003", "step-00000020", "step-00000030", "step-5", "step-000000001", "backup",
                           "step-00000040"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp / kept)) << kept;
  }
  EXPECT_TRUE(KeepLastCheckpoints(tmp.path(), 2)->empty());
  EXPECT_TRUE(ListCheckpoints(tmp / "does-not-exist")->empty());
  EXPECT_FALSE(LatestCheckpoint(tmp / "does-not-exist")->has_value());
}

}  // namespace
}  // namespace tessera::parallel::checkpoint

// Damaged and misused checkpoints: every case gives the documented Status
// (naming the path) and never modifies what is saved.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_reader.h"
#include "tessera/parallel/checkpoint/checkpoint_test_util.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"

namespace tessera::parallel::checkpoint {
namespace {

using nlohmann::json;
using testing::AddTiled;
using testing::GridBoxes;
using testing::RandomBytes;
using testing::ReadFileBytes;
using testing::TempDir;
using testing::WriteFileBytes;

constexpr char kShard0[] = "shard-00000-of-00002.safetensors";
constexpr char kShard1[] = "shard-00001-of-00002.safetensors";

// A [4, 6] F32 tensor "w" in a 2 x 2 grid over two shards, plus a scalar.
class CheckpointFailure : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_ / "ckpt";
    CheckpointWriter writer(2, 5);
    std::vector<std::vector<std::byte>> keep;
    ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kF32, {4, 6}, data_, GridBoxes({{0, 2, 4}, {0, 3, 6}}), keep).ok());
    ASSERT_TRUE(writer.AddTensor("step_count", StorageDtype::kI64, {}, scalar_.data(), 1).ok());
    ASSERT_TRUE(writer.Commit(dir_).ok());
  }

  json Index() const { return json::parse(ReadFileBytes(dir_ / "index.json")); }
  void WriteIndex(const json& j) const { WriteFileBytes(dir_ / "index.json", j.dump()); }

  // Open (and, when it opens, Verify) must fail with `code` and a message
  // holding `text`.
  void ExpectBroken(StatusCode code, const std::string& text) const {
    StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
    Status st = reader.ok() ? reader->Verify().status() : reader.status();
    ASSERT_FALSE(st.ok()) << "expected: " << text;
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.ToString().find(text), std::string::npos) << st.ToString();
  }

  std::map<std::string, std::string> Snapshot() const {
    std::map<std::string, std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      files[e.path().filename().string()] = ReadFileBytes(e.path());
    }
    return files;
  }

  TempDir tmp_;
  std::filesystem::path dir_;
  std::vector<std::byte> data_ = RandomBytes(4 * 6 * 4, 1);
  std::vector<std::byte> scalar_ = RandomBytes(8, 2);
};

TEST_F(CheckpointFailure, MissingIndexIsNotACheckpoint) {
  std::filesystem::remove(dir_ / "index.json");
  ExpectBroken(StatusCode::kNotFound, "is not a checkpoint (no index.json)");
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(tmp_ / "nothing-here");
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
}

TEST_F(CheckpointFailure, LeftoverTmpFilesAreIgnored) {
  WriteFileBytes(dir_ / "index.json.tmp", "{garbage");
  WriteFileBytes(dir_ / (std::string(kShard0) + ".tmp"), "partial");
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE(reader->Verify().ok());
  EXPECT_EQ(reader->ReadTensor("w")->bytes, data_);
}

TEST_F(CheckpointFailure, FlippedBitIsDataLossNamingTheFile) {
  std::string bytes = ReadFileBytes(dir_ / kShard1);
  bytes[bytes.size() - 3] ^= 0x10;
  WriteFileBytes(dir_ / kShard1, bytes);
  ExpectBroken(StatusCode::kDataLoss, (dir_ / kShard1).string() + "' is corrupt");
  // ReadTensor checks the digest of each shard the first time it reads it.
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(reader->ReadSlice("w", std::vector<int64_t>{0, 0}, std::vector<int64_t>{2, 3}).ok());  // shard 0
  StatusOr<TensorData> w = reader->ReadTensor("w");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(w.status().message().find(kShard1), std::string::npos);
}

TEST_F(CheckpointFailure, ReadManyReadsWhatItCanAndReportsADamagedShard) {
  std::string bytes = ReadFileBytes(dir_ / kShard1);
  bytes[bytes.size() - 3] ^= 0x10;
  WriteFileBytes(dir_ / kShard1, bytes);
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
  ASSERT_TRUE(reader.ok());
  // The top-left box lives in shard 0 alone (the 2 x 2 grid: rows 0-1 in shard 0).
  const std::vector<std::string> files = reader->FilesFor("w", std::vector<int64_t>{0, 0}, std::vector<int64_t>{2, 3});
  ASSERT_EQ(files, std::vector<std::string>{kShard0});
  std::vector<float> box(6), all(24);
  auto bytes_of = [](std::vector<float>& v) { return std::span<std::byte>(reinterpret_cast<std::byte*>(v.data()), v.size() * 4); };
  const std::vector<CheckpointReader::ReadRequest> good = {{"w", {0, 0}, {2, 3}, bytes_of(box)}};
  ASSERT_TRUE(reader->ReadMany(good, 2).ok());
  float want = 0;
  std::memcpy(&want, data_.data() + (6 + 1) * 4, 4);
  EXPECT_EQ(std::memcmp(&box[4], &want, 4), 0) << "row 1, column 1 of w";
  EXPECT_EQ(reader->FilesFor("w", std::vector<int64_t>{0, 0}, std::vector<int64_t>{4, 6}).size(), 2u);
  EXPECT_TRUE(reader->FilesFor("nope", std::vector<int64_t>{0}, std::vector<int64_t>{1}).empty());
  const std::vector<CheckpointReader::ReadRequest> bad = {{"w", {0, 0}, {2, 3}, bytes_of(box)},
                                                          {"w", {0, 0}, {4, 6}, bytes_of(all)}};
  const Status st = reader->ReadMany(bad, 4);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find(kShard1), std::string::npos) << st.ToString();
}

TEST_F(CheckpointFailure, TruncatedShard) {
  std::string bytes = ReadFileBytes(dir_ / kShard0);
  WriteFileBytes(dir_ / kShard0, bytes.substr(0, bytes.size() - 5));
  ExpectBroken(StatusCode::kDataLoss, (dir_ / kShard0).string() + "' is " + std::to_string(bytes.size() - 5));
}

TEST_F(CheckpointFailure, MissingShardFile) {
  std::filesystem::remove(dir_ / kShard1);
  ExpectBroken(StatusCode::kDataLoss, (dir_ / kShard1).string() + "' is listed in");
}

TEST_F(CheckpointFailure, ShardReplacedByAnotherValidFile) {
  // Same bytes count, valid safetensors, but another digest.
  std::string bytes = ReadFileBytes(dir_ / kShard0);
  const json index = Index();
  json changed = index;
  changed["files"][kShard0]["xxh3_64"] = "0123456789abcdef";
  WriteIndex(changed);
  ExpectBroken(StatusCode::kDataLoss, "the index says 0123456789abcdef");
}

TEST_F(CheckpointFailure, IndexDtypeOrShapeDisagreeingWithTheShard) {
  json index = Index();
  index["tensors"]["w"]["dtype"] = "I32";  // same size, other dtype
  WriteIndex(index);
  ExpectBroken(StatusCode::kDataLoss, "is F32 [2, 3], but the index says I32 [2, 3]");
}

TEST_F(CheckpointFailure, IndexSlicesOverlapLeaveAGapOrExceedTheTensor) {
  const json original = Index();
  json overlap = original;
  overlap["tensors"]["w"]["shards"][1]["offset"] = {0, 2};  // second slice moved left by one column
  WriteIndex(overlap);
  ExpectBroken(StatusCode::kDataLoss, "overlap");

  json gap = original;
  gap["tensors"]["w"]["shape"] = {4, 7};
  WriteIndex(gap);
  ExpectBroken(StatusCode::kDataLoss, "cover 24 of its 28 elements (a gap)");

  json outside = original;
  outside["tensors"]["w"]["shards"][3]["offset"] = {2, 4};
  WriteIndex(outside);
  ExpectBroken(StatusCode::kDataLoss, "slice at offset [2, 4] with shape [2, 3] is outside it");

  json rank = original;
  rank["tensors"]["w"]["shards"][0]["offset"] = {0};
  WriteIndex(rank);
  ExpectBroken(StatusCode::kDataLoss, "is outside it");
}

TEST_F(CheckpointFailure, MalformedIndexFields) {
  const json original = Index();
  const auto broken = [&](const std::function<void(json&)>& edit, const std::string& text) {
    json j = original;
    edit(j);
    WriteIndex(j);
    ExpectBroken(StatusCode::kDataLoss, text);
  };
  broken([](json& j) { j["format"] = "other"; }, "format is \"other\"");
  broken([](json& j) { j["version"] = 2; }, "version 2 is not supported");
  broken([](json& j) { j.erase("files"); }, "has no \"files\"");
  broken([](json& j) { j["step"] = -1; }, "\"step\" = -1");
  broken([](json& j) { j["metadata"] = "x"; }, "\"metadata\" is not a JSON object");
  broken([](json& j) { j["tensors"]["w"]["dtype"] = "F31"; }, "unknown dtype \"F31\"");
  broken([](json& j) { j["tensors"]["w"]["shards"][0].erase("key"); }, "has no \"key\"");
  broken([](json& j) { j["files"]["../escape.safetensors"] = j["files"][kShard0]; }, "not a plain file name");
  broken([](json& j) { j["files"]["index.json"] = j["files"][kShard0]; }, "cannot be a shard file name");
  broken([](json& j) { j["tensors"]["w"]["shards"][0]["file"] = "unlisted.safetensors"; }, "does not list");
  broken([](json& j) { j["files"][kShard0]["xxh3_64"] = "xyz"; }, "not a 64-bit hex digest");
  broken([](json& j) { j["files"]["extra.safetensors"] = {{"bytes", 8}, {"xxh3_64", "0000000000000000"}}; },
         "extra.safetensors' is listed in");
  WriteFileBytes(dir_ / "index.json", "{\"format\": \"tessera-checkpoint\", \"format\": 1}");
  ExpectBroken(StatusCode::kDataLoss, "repeats key 'format'");
  std::string deep = original.dump();
  deep.insert(deep.size() - 1, ",\"deep\":" + std::string(100000, '[') + std::string(100000, ']'));
  WriteFileBytes(dir_ / "index.json", deep);
  ExpectBroken(StatusCode::kDataLoss, "nests deeper than 64 levels");
  WriteFileBytes(dir_ / "index.json", "");
  ExpectBroken(StatusCode::kDataLoss, "not valid JSON");
}

TEST_F(CheckpointFailure, BadRequests) {
  StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->ReadTensor("nope").status().code(), StatusCode::kNotFound);
  const std::vector<int64_t> off = {3, 0}, shape = {2, 6};
  EXPECT_EQ(reader->ReadSlice("w", off, shape).status().code(), StatusCode::kOutOfRange);
  const std::vector<int64_t> off1 = {0}, shape1 = {2};
  EXPECT_EQ(reader->ReadSlice("w", off1, shape1).status().code(), StatusCode::kOutOfRange);
  std::vector<std::byte> small(4);
  const std::vector<int64_t> zero = {0, 0}, full = {4, 6};
  EXPECT_EQ(reader->ReadSliceInto("w", zero, full, small).code(), StatusCode::kInvalidArgument);
}

TEST_F(CheckpointFailure, CommitOverAnExistingCheckpointFailsAndLeavesItIntact) {
  const auto before = Snapshot();
  const float x = 3;
  CheckpointWriter other(1, 6);
  ASSERT_TRUE(other.AddTensor("x", StorageDtype::kF32, {}, &x, 0).ok());
  const Status st = other.Commit(dir_);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
  EXPECT_EQ(Snapshot(), before);
  EXPECT_TRUE(CheckpointReader::Open(dir_)->Verify().ok());
}

TEST(CheckpointWriterErrors, InvalidLayoutsWriteNothing) {
  TempDir tmp;
  const std::vector<std::byte> data = RandomBytes(4 * 4 * 4, 3);
  const auto commit_fails = [&](std::vector<Box> boxes, const std::string& text) {
    CheckpointWriter writer(2);
    std::vector<std::vector<std::byte>> keep;
    ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kF32, {4, 4}, data, boxes, keep).ok());
    const Status st = writer.Commit(tmp / "bad");
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad"));
  };
  commit_fails({Box{{0, 0}, {3, 4}}, Box{{2, 0}, {2, 4}}}, "overlap");
  commit_fails({Box{{0, 0}, {2, 4}}, Box{{3, 0}, {1, 4}}}, "a gap");

  CheckpointWriter writer(2);
  const float x = 0;
  EXPECT_EQ(writer.AddTensor("x", StorageDtype::kF32, {}, &x, 2).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.AddSlice({"y", StorageDtype::kF32, {4}, {2}, {3}, &x, 0}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(writer.AddSlice({"z", StorageDtype::kF32, {2}, {0}, {1}, &x, 0}).ok());
  EXPECT_EQ(writer.AddSlice({"z", StorageDtype::kF16, {2}, {1}, {1}, &x, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer.SetMetadata(json::array()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckpointWriter(0).Commit(tmp / "zero").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::parallel::checkpoint

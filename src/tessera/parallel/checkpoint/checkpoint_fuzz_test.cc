// Seeded fuzz of the checkpoint index reader and of a whole checkpoint
// (index + shards) on disk: random truncations, byte flips and field
// rewrites. Asserts only that every call returns: OK, or a non-OK Status
// with a message (AddressSanitizer/UBSan builds check the rest).
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_index.h"
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

void ExpectReturned(const Status& st) {
  if (!st.ok()) {
    EXPECT_FALSE(st.message().empty()) << StatusCodeName(st.code());
  }
}

class CheckpointFuzz : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_ / "ckpt";
    CheckpointWriter writer(2, 77);
    ASSERT_TRUE(writer.SetMetadata({{"mesh", {{"dp", 2}}}, {"note", "fuzz"}}).ok());
    const auto w_boxes = GridBoxes({{0, 1, 4}, {0, 2, 3, 6}});
    ASSERT_TRUE(AddTiled(writer, "w", StorageDtype::kF32, {4, 6}, w_, w_boxes, keep_).ok());
    ASSERT_TRUE(AddTiled(writer, "v", StorageDtype::kI8, {5}, v_, GridBoxes({{0, 2, 5}}), keep_).ok());
    ASSERT_TRUE(writer.AddTensor("s", StorageDtype::kF64, {}, s_.data(), 1).ok());
    ASSERT_TRUE(writer.AddTensor("e", StorageDtype::kBF16, {0, 3}, nullptr, 0).ok());
    ASSERT_TRUE(writer.Commit(dir_).ok());
    index_text_ = ReadFileBytes(dir_ / "index.json");
    shard_bytes_ = ReadFileBytes(dir_ / kShard0);
    ASSERT_TRUE(ParseCheckpointIndex(index_text_, "seed").ok());
  }

  // Replaces one random leaf (number, string, bool, null) of the index with
  // a value chosen to hit the validator's edges.
  std::string RewriteField(std::mt19937_64& rng) const {
    json j = json::parse(index_text_);
    const json flat = j.flatten();
    auto it = flat.begin();
    std::advance(it, static_cast<long>(rng() % flat.size()));
    const json kValues[] = {-1, 0, 1, 2, 3, 5, 6, 7, 1ll << 31, 1ll << 62, std::numeric_limits<int64_t>::max(),
                            18446744073709551615ull, 1.5, "x", "F32", "", nullptr, json::array(), json::object(),
                            true};
    j[json::json_pointer(it.key())] = kValues[rng() % std::size(kValues)];
    return j.dump();
  }

  std::string FlipOrTruncate(std::string text, std::mt19937_64& rng) const {
    switch (rng() % 3) {
      case 0:
        text.resize(rng() % text.size());
        break;
      case 1:
        text[rng() % text.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      default: {
        static const char kChars[] = "{}[],:\"-0123456789 ";
        text[rng() % text.size()] = kChars[rng() % (sizeof kChars - 1)];
      }
    }
    return text;
  }

  TempDir tmp_;
  std::filesystem::path dir_;
  std::vector<std::byte> w_ = RandomBytes(4 * 6 * 4, 1), v_ = RandomBytes(5, 2), s_ = RandomBytes(8, 3);
  std::vector<std::vector<std::byte>> keep_;
  std::string index_text_, shard_bytes_;
};

TEST_F(CheckpointFuzz, IndexParserNeverCrashes) {
  std::mt19937_64 rng(424242);
  int oks = 0;
  constexpr int kCases = 3000;
  for (int i = 0; i < kCases; ++i) {
    const std::string text = rng() % 2 ? RewriteField(rng) : FlipOrTruncate(index_text_, rng);
    StatusOr<CheckpointIndex> index = ParseCheckpointIndex(text, "fuzz/index.json");
    ExpectReturned(index.status());
    if (index.ok()) {
      ++oks;
      ASSERT_TRUE(ValidateCheckpointIndex(*index, "again").ok());
      ASSERT_TRUE(ParseCheckpointIndex(CheckpointIndexToJson(*index).dump(), "reencoded").ok());
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(oks, 0);  // some rewrites keep the index valid (seeded: 176)
  EXPECT_LT(oks, kCases / 2);
}

// The whole read path on disk: damaged index, damaged shard (with the index
// updated to match it, so the shard parser and the index/shard cross-checks
// run past the digest), then Open, Verify, ReadTensor and ReadSlice.
TEST_F(CheckpointFuzz, ReaderOnDamagedCheckpointsNeverCrashes) {
  std::mt19937_64 rng(777);
  int opened = 0, verified = 0;
  for (int i = 0; i < 300; ++i) {
    std::string index_text = index_text_, shard = shard_bytes_;
    switch (rng() % 3) {
      case 0:
        index_text = RewriteField(rng);
        break;
      case 1:
        index_text = FlipOrTruncate(index_text, rng);
        break;
      default: {
        shard = FlipOrTruncate(shard, rng);
        if (shard.empty()) shard.push_back('x');
        json j = json::parse(index_text_);
        j["files"][kShard0]["bytes"] = shard.size();
        j["files"][kShard0]["xxh3_64"] = base::HexDigest(base::Checksum64(shard));
        index_text = j.dump();
      }
    }
    WriteFileBytes(dir_ / "index.json", index_text);
    WriteFileBytes(dir_ / kShard0, shard);
    StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir_);
    ExpectReturned(reader.status());
    if (!reader.ok()) continue;
    ++opened;
    const StatusOr<VerifyReport> report = reader->Verify();
    ExpectReturned(report.status());
    verified += report.ok();
    for (const auto& [name, t] : reader->index().tensors) {
      ExpectReturned(reader->ReadTensor(name).status());
      std::vector<int64_t> offset, shape;
      for (int64_t extent : t.shape) {
        const int64_t a = extent == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(extent));
        offset.push_back(a);
        shape.push_back(extent == 0 ? 0 : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(extent - a)));
      }
      ExpectReturned(reader->ReadSlice(name, offset, shape).status());
    }
    if (HasFailure()) return;
  }
  // The mutations reach past Open and Verify (seeded: 106 and 19 of 300).
  EXPECT_GT(opened, 30);
  EXPECT_GT(verified, 5);
}

}  // namespace
}  // namespace tessera::parallel::checkpoint

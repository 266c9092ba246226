#include "tessera/parallel/checkpoint/safetensors.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_test_util.h"

namespace tessera::parallel::checkpoint {
namespace {

using testing::RandomBytes;
using testing::TempDir;

std::string LengthPrefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::string Floats(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) {
    char b[4];
    std::memcpy(b, &v, 4);
    out.append(b, 4);
  }
  return out;
}

// huggingface/safetensors' own serialization test vector (safetensors/src/
// tensor.rs, test_serialization): "attn.0", F32 [1, 2, 3] = 0..5.
TEST(SafetensorsFormat, MatchesTheReferenceImplementationByteForByte) {
  const std::string expected = Bytes(
      {64,  0,   0,   0,   0,   0,   0,   0,   123, 34,  97,  116, 116, 110, 46,  48,  34, 58,  123, 34,  100,
       116, 121, 112, 101, 34,  58,  34,  70,  51,  50,  34,  44,  34,  115, 104, 97,  112, 101, 34,
       58,  91,  49,  44,  50,  44,  51,  93,  44,  34,  100, 97,  116, 97,  95,  111, 102, 102, 115,
       101, 116, 115, 34,  58,  91,  48,  44,  50,  52,  93,  125, 125, 0,   0,   0,   0,   0,   0,   128, 63,
       0,   0,   0,   64,  0,   0,   64,  64,  0,   0,   128, 64,  0,   0,   160, 64});
  const float data[] = {0, 1, 2, 3, 4, 5};
  const TensorToWrite t{{"attn.0", StorageDtype::kF32, {1, 2, 3}}, data};
  StatusOr<std::string> out = SafetensorsToString({&t, 1}, {});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, expected);
}

TEST(SafetensorsFormat, HandBuiltFileWithMetadataAndPadding) {
  // Spec: u64 LE header size, JSON ("__metadata__" first, then tensors in
  // data order, fields dtype/shape/data_offsets) padded with spaces to a
  // multiple of 8, then the packed little-endian data.
  const std::string json =
      R"({"__metadata__":{"k":"v","step":"7"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},"s":{"dtype":"I16","shape":[],"data_offsets":[11,13]},)"
      R"("e":{"dtype":"BF16","shape":[0,4],"data_offsets":[13,13]}})";
  ASSERT_EQ(json.size(), 255u);
  const std::string padded = json + " ";  // 256 = 32 * 8
  const std::string expected = Bytes({0x00, 0x01, 0, 0, 0, 0, 0, 0}) + padded + Floats({1.0f, 2.0f}) +
                               Bytes({1, 2, 3}) + Bytes({0xfe, 0xff});  // I16 -2, little-endian
  const float a[] = {1, 2};
  const uint8_t b[] = {1, 2, 3};
  const int16_t s = -2;
  const TensorToWrite tensors[] = {{{"a", StorageDtype::kF32, {2}}, a},
                                   {{"b", StorageDtype::kU8, {3}}, b},
                                   {{"s", StorageDtype::kI16, {}}, &s},
                                   {{"e", StorageDtype::kBF16, {0, 4}}, nullptr}};
  StatusOr<std::string> out = SafetensorsToString(tensors, {{"step", "7"}, {"k", "v"}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, expected);

  StatusOr<SafetensorsFile> parsed = SafetensorsFile::Parse(MappedFile::FromBytes(expected), "golden");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->header_size(), 256u);
  ASSERT_EQ(parsed->tensors().size(), 4u);
  EXPECT_EQ(parsed->tensors()[0].spec.name, "a");
  EXPECT_EQ(parsed->tensors()[3].spec.name, "e");
  EXPECT_EQ(parsed->metadata().at("k"), "v");
  const SafetensorsFile::Entry* entry = parsed->Find("s");
  ASSERT_NE(entry, nullptr);
  EXPECT_TRUE(entry->spec.shape.empty());
  int16_t read_s = 0;
  ASSERT_EQ(parsed->TensorBytes(*entry).size(), 2u);
  std::memcpy(&read_s, parsed->TensorBytes(*entry).data(), 2);
  EXPECT_EQ(read_s, -2);
}

TEST(SafetensorsFormat, EmptyFileIsAnEmptyObjectPadded) {
  StatusOr<std::string> out = SafetensorsToString({}, {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, LengthPrefix(8) + "{}      ");
  EXPECT_TRUE(SafetensorsFile::Parse(MappedFile::FromBytes(*out), "empty").ok());
}

TEST(SafetensorsFormat, DtypeNamesAndSizes) {
  const std::pair<const char*, size_t> expected[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},      {"I16", 2},
                                                     {"I32", 4},  {"I64", 8}, {"F16", 2},     {"BF16", 2},
                                                     {"F32", 4},  {"F64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  ASSERT_EQ(std::size(kAllStorageDtypes), std::size(expected));
  for (size_t i = 0; i < std::size(expected); ++i) {
    EXPECT_EQ(StorageDtypeName(kAllStorageDtypes[i]), expected[i].first);
    EXPECT_EQ(StorageDtypeSize(kAllStorageDtypes[i]), expected[i].second);
    EXPECT_EQ(ParseStorageDtype(expected[i].first), kAllStorageDtypes[i]);
  }
  EXPECT_FALSE(ParseStorageDtype("f32").has_value());
}

TEST(SafetensorsRoundTrip, EveryDtypeScalarEmptyAndLarge) {
  TempDir tmp;
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<std::byte>> storage;
  int seed = 0;
  for (StorageDtype dtype : kAllStorageDtypes) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 5}, {}, {0}, {2, 0, 3}, {7}}) {
      TensorSpec spec{fmt::format("{}/{}", StorageDtypeName(dtype), tensors.size()), dtype, shape};
      storage.push_back(RandomBytes(TensorByteSize(spec), ++seed));
      tensors.push_back({spec, storage.back().data()});
    }
  }
  storage.push_back(RandomBytes(4 << 20, 99));  // 4 MiB
  tensors.push_back({{"large", StorageDtype::kF32, {1024, 1024}}, storage.back().data()});
  const auto path = tmp / "model.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors, {{"format", "pt"}}).ok());
  EXPECT_FALSE(std::filesystem::exists(tmp / "model.safetensors.tmp"));

  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  ASSERT_EQ(file->tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsFile::Entry* e = file->Find(tensors[i].spec.name);
    ASSERT_NE(e, nullptr) << tensors[i].spec.name;
    EXPECT_EQ(e->spec.dtype, tensors[i].spec.dtype);
    EXPECT_EQ(e->spec.shape, tensors[i].spec.shape);
    const auto bytes = file->TensorBytes(*e);
    ASSERT_EQ(bytes.size(), storage[i].size());
    EXPECT_TRUE(bytes.empty() || std::memcmp(bytes.data(), storage[i].data(), bytes.size()) == 0)
        << tensors[i].spec.name;
  }
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  const float x[2] = {1, 2};
  const auto fails = [](std::vector<TensorToWrite> t, const std::string& want) {
    StatusOr<std::string> out = SafetensorsToString(t, {});
    ASSERT_FALSE(out.ok()) << want;
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().ToString().find(want), std::string::npos) << out.status().ToString();
  };
  fails({{{"a", StorageDtype::kF32, {2}}, x}, {{"a", StorageDtype::kF32, {2}}, x}}, "appears twice");
  fails({{{"__metadata__", StorageDtype::kF32, {2}}, x}}, "reserved");
  fails({{{"", StorageDtype::kF32, {2}}, x}}, "non-empty name");
  fails({{{"n", StorageDtype::kF32, {-2}}, x}}, "negative");
  fails({{{"o", StorageDtype::kF32, {int64_t{1} << 40, int64_t{1} << 40}}, x}}, "overflow");
  fails({{{"z", StorageDtype::kF32, {2}}, nullptr}}, "no data");
  fails({{{"bad\xff utf8", StorageDtype::kF32, {2}}, x}}, "UTF-8");
}

}  // namespace
}  // namespace tessera::parallel::checkpoint

// The safetensors reader against malformed files: a table of hand-made
// defects (each must give DataLoss naming the file and the defect) and a
// seeded fuzz of truncations and byte flips (every call must return).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/parallel/checkpoint/checkpoint_test_util.h"
#include "tessera/parallel/checkpoint/safetensors.h"

namespace tessera::parallel::checkpoint {
namespace {

using testing::TempDir;

std::string WithHeader(const std::string& json, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json + std::string(data_bytes, '\x5a');
}

std::string RawLength(uint64_t n) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out;
}

struct MalformedCase {
  const char* what;
  std::string bytes;
  const char* message;  // expected in the error
};

TEST(SafetensorsReader, RejectsEveryMalformedInputWithAClearError) {
  const std::string ok_tensor = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<MalformedCase> cases = {
      {"empty file", "", "shorter than the 8-byte header length"},
      {"7 bytes", std::string(7, '\0'), "shorter than the 8-byte header length"},
      {"header over 100 MiB", RawLength((100ull << 20) + 1) + "{}", "exceeds the 104857600-byte limit"},
      {"header past the end", RawLength(64) + "{}", "runs past the end of the file"},
      {"huge header length", RawLength(~0ull) + "{}", "exceeds"},
      {"not JSON", WithHeader("{\"t\": ", 0), "not valid JSON"},
      {"invalid UTF-8", WithHeader("{\"\xff\":1}", 0), "not valid JSON"},
      {"not an object", WithHeader("[1, 2]", 0), "not an object"},
      {"deep nesting", WithHeader("{\"t\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0),
       "nests deeper than 64 levels"},
      {"tensor not an object", WithHeader(R"({"t": 3})", 0), "tensor 't' is a JSON number"},
      {"no dtype", WithHeader(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), "no \"dtype\""},
      {"dtype not a string", WithHeader(R"({"t":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8), "no \"dtype\""},
      {"unknown dtype", WithHeader(R"({"t":{"dtype":"F128","shape":[2],"data_offsets":[0,8]}})", 8),
       "unknown dtype \"F128\""},
      {"no shape", WithHeader(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8), "no \"shape\""},
      {"negative extent", WithHeader(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "shape entry -2"},
      {"fractional extent", WithHeader(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       "shape entry 2.5"},
      {"shape overflow", WithHeader(R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8),
       "overflow"},
      {"extent beyond int64",
       WithHeader(R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})", 8), "shape entry"},
      {"no data_offsets", WithHeader(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "no \"data_offsets\""},
      {"three offsets", WithHeader(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", 8),
       "no \"data_offsets\" pair"},
      {"negative offset", WithHeader(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8),
       "want two integers >= 0"},
      {"end before begin", WithHeader(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "end 0 < begin 8"},
      {"offsets past the data", WithHeader(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
       "ends at byte 16 of a 8-byte data section"},
      {"bytes != shape", WithHeader(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "hold 8 bytes, but shape [3] of F32 needs 12"},
      {"overlap",
       WithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  8),
       "'a' and 'b' overlap"},
      {"hole",
       WithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                  12),
       "bytes [4, 8) of the data section belong to no tensor"},
      {"trailing bytes", WithHeader("{" + ok_tensor + "}", 9), "last 1 bytes of the data section"},
      {"truncated data", WithHeader("{" + ok_tensor + "}", 7), "ends at byte 8 of a 7-byte data section"},
      {"duplicate name", WithHeader("{" + ok_tensor + "," + ok_tensor + "}", 8), "repeats key 't'"},
      {"metadata not an object", WithHeader(R"({"__metadata__":[1]})", 0), "__metadata__ is a JSON array"},
      {"metadata not strings", WithHeader(R"({"__metadata__":{"step":7}})", 0),
       "__metadata__ entry 'step' is a JSON number, not a string"},
      {"duplicate metadata key", WithHeader(R"({"__metadata__":{"a":"1","a":"2"}})", 0), "repeats key 'a'"},
  };
  for (const MalformedCase& c : cases) {
    StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(MappedFile::FromBytes(c.bytes), "bad.safetensors");
    ASSERT_FALSE(file.ok()) << c.what;
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << c.what;
    const std::string text = file.status().ToString();
    EXPECT_NE(text.find("bad.safetensors"), std::string::npos) << c.what << ": " << text;
    EXPECT_NE(text.find(c.message), std::string::npos) << c.what << ": " << text;
  }
}

TEST(SafetensorsReader, ErrorsOnDiskNameThePath) {
  TempDir tmp;
  const auto path = tmp / "short.safetensors";
  testing::WriteFileBytes(path, "abc");
  StatusOr<SafetensorsFile> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find(path.string()), std::string::npos) << file.status().ToString();
  file = SafetensorsFile::Open(tmp / "missing.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("missing.safetensors"), std::string::npos);
}

// A small valid file to corrupt.
std::string FuzzSeedFile() {
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const int64_t b[2] = {-1, 7};
  const uint8_t c = 1;
  const TensorToWrite tensors[] = {{{"layer.0.weight", StorageDtype::kF32, {2, 3}}, a},
                                   {{"b", StorageDtype::kI64, {2}}, b},
                                   {{"flag", StorageDtype::kBool, {}}, &c},
                                   {{"none", StorageDtype::kF16, {0, 2}}, nullptr}};
  return *SafetensorsToString(tensors, {{"format", "pt"}, {"step", "12"}});
}

// Calls every accessor, so AddressSanitizer sees any out-of-bounds span.
void Exercise(const StatusOr<SafetensorsFile>& file, size_t* oks) {
  if (!file.ok()) {
    ASSERT_FALSE(file.status().message().empty());
    return;
  }
  ++*oks;
  unsigned sum = 0;
  for (const auto& e : file->tensors()) {
    for (std::byte b : file->TensorBytes(e)) sum += static_cast<unsigned>(b);
    ASSERT_EQ(file->Find(e.spec.name), &e);
  }
  for (const auto& [k, v] : file->metadata()) sum += static_cast<unsigned>(k.size() + v.size());
  ::testing::Test::RecordProperty("checksum", static_cast<int>(sum & 1));
}

TEST(SafetensorsFuzz, TruncationsAndByteFlipsNeverCrash) {
  const std::string seed_file = FuzzSeedFile();
  ASSERT_TRUE(SafetensorsFile::Parse(MappedFile::FromBytes(seed_file), "seed").ok());
  std::mt19937_64 rng(20240611);
  size_t oks = 0;
  const uint64_t header_end = 8 + (static_cast<uint8_t>(seed_file[0]) | static_cast<uint8_t>(seed_file[1]) << 8);
  constexpr int kCases = 4000;
  for (int i = 0; i < kCases; ++i) {
    std::string bytes = seed_file;
    switch (rng() % 5) {
      case 0:  // truncate
        bytes.resize(rng() % bytes.size());
        break;
      case 1:  // flip 1-3 bits anywhere
        for (int k = 1 + rng() % 3; k > 0; --k) bytes[rng() % bytes.size()] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 2:  // overwrite a header byte with a JSON-significant or random character
      {
        static const char kChars[] = "{}[],:\"-0123456789e. \\x";
        const size_t at = 8 + rng() % (header_end - 8);
        bytes[at] = rng() % 2 ? kChars[rng() % (sizeof kChars - 1)] : static_cast<char>(rng());
        break;
      }
      case 3:  // damage the length prefix
        bytes[rng() % 8] = static_cast<char>(rng());
        break;
      case 4:  // insert or erase bytes in the header
      {
        const size_t at = 8 + rng() % (header_end - 8);
        if (rng() % 2) {
          bytes.insert(at, 1 + rng() % 4, static_cast<char>(rng()));
        } else {
          bytes.erase(at, 1 + rng() % 4);
        }
        break;
      }
    }
    Exercise(SafetensorsFile::Parse(MappedFile::FromBytes(std::move(bytes)), "fuzz"), &oks);
    if (HasFatalFailure()) return;
  }
  EXPECT_LT(oks, static_cast<size_t>(kCases));  // most mutations are caught
}

}  // namespace
}  // namespace tessera::parallel::checkpoint

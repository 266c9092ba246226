#include "tessera/base/checksum.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera::base {
namespace {

// xxHash's own sanity-check buffer (cli/xsum_sanity_check.c): byte i is the
// top byte of PRIME32 * PRIME64^i.
std::vector<uint8_t> SanityBuffer(size_t n) {
  std::vector<uint8_t> buf(n);
  uint64_t gen = 2654435761ULL;
  for (size_t i = 0; i < n; ++i) {
    buf[i] = static_cast<uint8_t>(gen >> 56);
    gen *= 11400714785074694797ULL;
  }
  return buf;
}

TEST(Checksum, KnownVectors64) {
  EXPECT_EQ(Checksum64("", 0), 0x2D06800538D394C2ULL);
  EXPECT_EQ(Checksum64(std::string_view()), 0x2D06800538D394C2ULL);
  const std::vector<uint8_t> buf = SanityBuffer(2367);
  // Published XXH3_64bits vectors from xxHash's sanity check, seed 0.
  const std::pair<size_t, uint64_t> kVectors[] = {
      {1, 0xC44BDFF4074EECDBULL},   {6, 0x27B56A84CD2D7325ULL},   {12, 0xA713DAF0DFBB77E7ULL},
      {24, 0xA3FE70BF9D3510EBULL},  {48, 0x397DA259ECBA1F11ULL},  {80, 0xBCDEFBBB2C47C90AULL},
      {195, 0xCD94217EE362EC3AULL}, {403, 0xCDEB804D65C6DEA4ULL}, {512, 0x617E49599013CB6BULL},
      {2048, 0xDD59E2C3A5F038E0ULL}, {2240, 0x6E73A90539CF2948ULL}, {2367, 0xCB37AEB9E5D361EDULL},
  };
  for (const auto& [len, want] : kVectors) EXPECT_EQ(Checksum64(buf.data(), len), want) << "len " << len;
}

TEST(Checksum, KnownVectors128) {
  EXPECT_EQ(Checksum128("", 0), (Hash128{0x6001C324468D497FULL, 0x99AA06D3014798D8ULL}));
  const std::vector<uint8_t> buf = SanityBuffer(1);
  EXPECT_EQ(Checksum128(buf.data(), 1), (Hash128{0xC44BDFF4074EECDBULL, 0xA6CD5E9392000F6AULL}));
}

TEST(Checksum, SeedChangesHash) {
  const std::vector<uint8_t> buf = SanityBuffer(100);
  EXPECT_NE(Checksum64(buf.data(), buf.size(), 1), Checksum64(buf.data(), buf.size(), 0));
  EXPECT_NE(Checksum128(buf.data(), buf.size(), 1), Checksum128(buf.data(), buf.size(), 0));
  EXPECT_EQ(Checksum64(buf.data(), buf.size(), 7), Checksum64(buf.data(), buf.size(), 7));
}

TEST(Checksum, SingleBitFlipIsDetected) {
  std::vector<uint8_t> buf = SanityBuffer(4096);
  const uint64_t h = Checksum64(buf.data(), buf.size());
  const Hash128 h2 = Checksum128(buf.data(), buf.size());
  for (size_t bit : {0, 1000, 32767}) {
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(Checksum64(buf.data(), buf.size()), h);
    EXPECT_NE(Checksum128(buf.data(), buf.size()), h2);
    buf[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  EXPECT_NE(Checksum64(buf.data(), buf.size() - 1), h);  // truncation
}

TEST(Checksum, HexFormatting) {
  EXPECT_EQ(HexDigest(0x2D06800538D394C2ULL), "2d06800538d394c2");
  EXPECT_EQ(HexDigest(uint64_t{1}), "0000000000000001");
  EXPECT_EQ(HexDigest(Checksum128("", 0)), "99aa06d3014798d86001c324468d497f");
  auto parsed = ParseHexDigest64("2D06800538d394c2");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, 0x2D06800538D394C2ULL);
  auto parsed128 = ParseHexDigest128("99aa06d3014798d86001c324468d497f");
  ASSERT_TRUE(parsed128.ok());
  EXPECT_EQ(*parsed128, Checksum128("", 0));
  EXPECT_FALSE(ParseHexDigest64("2d06800538d394c").ok());   // too short
  EXPECT_FALSE(ParseHexDigest64("2d06800538d394cg").ok());  // bad digit
  EXPECT_FALSE(ParseHexDigest128("2d06800538d394c2").ok());
  EXPECT_EQ(ParseHexDigest64("xyz").status().code(), StatusCode::kInvalidArgument);
}

TEST(Checksum, StreamingMatchesOneShot) {
  const std::vector<uint8_t> buf = SanityBuffer(100000);
  std::mt19937 rng(3);
  for (uint64_t seed : {uint64_t{0}, uint64_t{12345}}) {
    StreamingChecksum s(seed);
    size_t pos = 0;
    while (pos < buf.size()) {
      size_t n = std::min(buf.size() - pos, static_cast<size_t>(rng() % 5000));
      s.Update(buf.data() + pos, n);
      pos += n;
    }
    EXPECT_EQ(s.bytes(), buf.size());
    EXPECT_EQ(s.Digest64(), Checksum64(buf.data(), buf.size(), seed));
    EXPECT_EQ(s.Digest128(), Checksum128(buf.data(), buf.size(), seed));
    // Digesting does not end the stream.
    s.Update(buf.data(), 10);
    std::vector<uint8_t> longer = buf;
    longer.insert(longer.end(), buf.begin(), buf.begin() + 10);
    EXPECT_EQ(s.Digest64(), Checksum64(longer.data(), longer.size(), seed));
  }
}

TEST(Checksum, StreamingCopyResetAndEmpty) {
  StreamingChecksum s;
  EXPECT_EQ(s.Digest64(), 0x2D06800538D394C2ULL);
  s.Update("hello ");
  StreamingChecksum copy = s;
  s.Update("world");
  copy.Update("there");
  EXPECT_EQ(s.Digest64(), Checksum64("hello world"));
  EXPECT_EQ(copy.Digest64(), Checksum64("hello there"));
  copy = s;
  EXPECT_EQ(copy.Digest128(), Checksum128("hello world"));
  s.Reset();
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.Digest64(), 0x2D06800538D394C2ULL);
  StreamingChecksum moved = std::move(copy);
  EXPECT_EQ(moved.Digest64(), Checksum64("hello world"));
}

}  // namespace
}  // namespace tessera::base

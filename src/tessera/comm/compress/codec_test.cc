#include "tessera/comm/compress/codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tessera::comm::compress {
namespace {

constexpr Codec kDense[] = {Codec::kBf16, Codec::kFp16, Codec::kInt8, Codec::kFp8};

// Round trip of x, every element checked against ErrorBound with its block's absmax.
void CheckRoundTrip(Codec c, const std::vector<float>& x) {
  std::vector<uint8_t> enc(EncodedBytes(c, x.size()) + 1, 0xAB);
  Encode(c, x.data(), x.size(), enc.data());
  EXPECT_EQ(enc.back(), 0xAB) << "wrote past EncodedBytes";
  std::vector<float> y(x.size(), 123.0f);
  Decode(c, enc.data(), x.size(), y.data(), false);
  for (size_t b = 0; b < x.size(); b += kBlock) {
    float a = 0;
    for (size_t i = b; i < std::min(x.size(), b + kBlock); ++i) a = std::max(a, std::fabs(x[i]));
    for (size_t i = b; i < std::min(x.size(), b + kBlock); ++i) {
      const double bound = ErrorBound(c, x[i], a) + 1e-6 * a;  // + float rounding of the scaling
      ASSERT_LE(std::fabs(double(y[i]) - x[i]), bound) << CodecName(c) << " n=" << x.size() << " i=" << i
                                                       << " x=" << x[i] << " a=" << a;
    }
  }
  // accumulate adds.
  std::vector<float> acc(x.size(), 1.0f);
  Decode(c, enc.data(), x.size(), acc.data(), true);
  // (the sum may be fused with the scaling: one rounding less)
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(acc[i], 1.0f + y[i], 1e-6 * (1 + std::fabs(y[i])));
}

TEST(CodecTest, RoundTripWithinBound) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (Codec c : kDense) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{4099}}) {
      std::vector<float> x(n);
      for (float& v : x) v = nd(rng);
      CheckRoundTrip(c, x);
    }
  }
}

TEST(CodecTest, ZerosAndLargeDynamicRange) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-30, 30);
  for (Codec c : kDense) {
    std::vector<float> zeros(700, 0.0f);
    CheckRoundTrip(c, zeros);
    std::vector<uint8_t> enc(EncodedBytes(c, zeros.size()));
    Encode(c, zeros.data(), zeros.size(), enc.data());
    std::vector<float> y(zeros.size(), 5.0f);
    Decode(c, enc.data(), y.size(), y.data(), false);
    for (float v : y) ASSERT_EQ(v, 0.0f) << CodecName(c);
    // Values spanning 1e-13 .. 1e13 across blocks and within them.
    std::vector<float> x(3000);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * std::pow(10.0f, u(rng) * 0.43f);
    CheckRoundTrip(c, x);
    // One block tiny, the next huge (the scale is per block).
    std::vector<float> y2(512);
    for (size_t i = 0; i < 256; ++i) y2[i] = 1e-20f * (1 + i % 7);
    for (size_t i = 256; i < 512; ++i) y2[i] = 1e20f * (1 + i % 7);
    CheckRoundTrip(c, y2);
  }
}

TEST(CodecTest, SizesAndSpecs) {
  EXPECT_EQ(EncodedBytes(Codec::kInt8, 0), 0u);
  EXPECT_EQ(EncodedBytes(Codec::kInt8, 1), 5u);
  EXPECT_EQ(EncodedBytes(Codec::kInt8, 512), 512u + 8u);
  EXPECT_EQ(EncodedBytes(Codec::kFp8, 257), 257u + 8u);
  EXPECT_EQ(EncodedBytes(Codec::kBf16, 10), 20u);
  EXPECT_EQ(EncodedBytes(Codec::kFp16, 256), 512u + 4u);
  EXPECT_EQ(ParseCompressionSpec("int8").value().codec, Codec::kInt8);
  EXPECT_EQ(ParseCompressionSpec("none").value().codec, Codec::kNone);
  auto t = ParseCompressionSpec("topk:0.01").value();
  EXPECT_EQ(t.codec, Codec::kTopK);
  EXPECT_DOUBLE_EQ(t.topk_fraction, 0.01);
  EXPECT_EQ(CompressionSpecName(t), "topk:0.01");
  EXPECT_FALSE(ParseCompressionSpec("int4").ok());
  EXPECT_FALSE(ParseCompressionSpec("topk:0").ok());
  EXPECT_FALSE(ParseCompressionSpec("topk:1.5").ok());
  EXPECT_FALSE(ParseCompressionSpec("topk:x").ok());
}

// The bound is tight enough to catch a wrong scale: int8 with a scale one
// step too coarse would exceed a/254 somewhere on random data.
TEST(CodecTest, Int8BoundIsNearlyAttained) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(256 * 40);
  for (float& v : x) v = u(rng);
  std::vector<uint8_t> enc(EncodedBytes(Codec::kInt8, x.size()));
  Encode(Codec::kInt8, x.data(), x.size(), enc.data());
  std::vector<float> y(x.size());
  Decode(Codec::kInt8, enc.data(), x.size(), y.data(), false);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(double(y[i]) - x[i]));
  EXPECT_GT(worst, 0.9 / 254);
  EXPECT_LE(worst, 1.0 / 254 + 1e-6);
}

}  // namespace
}  // namespace tessera::comm::compress

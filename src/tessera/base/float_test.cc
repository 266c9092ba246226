// Exhaustive tests of the 8- and 16-bit float types: every code round-trips,
// and float -> code conversion matches a slow reference that rounds to the
// nearest representable value (ties to the even code) found by search.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/base/float16.h"
#include "tessera/base/float8.h"

namespace tessera {
namespace {

// A float format described only by its decoder and largest finite code; the
// reference rounding below knows nothing of exponents or mantissas.
struct Format {
  const char* name;
  std::function<float(uint32_t)> decode;  // magnitude code -> value
  uint32_t max_code;                      // largest finite magnitude code
  uint32_t sign_bit;
  uint32_t overflow_code;  // non-saturating overflow result (magnitude)
  uint32_t nan_code;       // canonical NaN magnitude for NaN input
};

class ReferenceRounder {
 public:
  explicit ReferenceRounder(const Format& fmt) : fmt_(fmt) {
    for (uint32_t c = 0; c <= fmt.max_code; ++c) values_.push_back(fmt.decode(c));
    for (size_t i = 1; i < values_.size(); ++i) EXPECT_LT(values_[i - 1], values_[i]) << fmt.name << " code " << i;
    // One step past the largest finite value: rounding onto it is overflow.
    sentinel_ = values_.back() + (values_.back() - values_[values_.size() - 2]);
  }

  // Reference conversion: nearest of all representable magnitudes by binary
  // search; an exact tie goes to the even code.
  uint32_t Round(float x, bool saturate) const {
    if (std::isnan(x)) return (std::signbit(x) ? fmt_.sign_bit : 0u) | fmt_.nan_code;
    const uint32_t sign = std::signbit(x) ? fmt_.sign_bit : 0u;
    const double a = std::fabs(static_cast<double>(x));
    const uint32_t overflow = saturate ? fmt_.max_code : fmt_.overflow_code;
    if (a >= sentinel_) return sign | overflow;
    auto it = std::lower_bound(values_.begin(), values_.end(), a);
    uint32_t hi_code;
    double hi;
    if (it == values_.end()) {
      hi_code = fmt_.max_code + 1;
      hi = sentinel_;
    } else {
      hi_code = static_cast<uint32_t>(it - values_.begin());
      hi = *it;
    }
    if (hi == a) return sign | hi_code;
    const uint32_t lo_code = hi_code - 1;
    const double lo = values_[lo_code];
    uint32_t code;
    if (a - lo < hi - a) {
      code = lo_code;
    } else if (a - lo > hi - a) {
      code = hi_code;
    } else {
      code = (lo_code % 2 == 0) ? lo_code : hi_code;
    }
    if (code > fmt_.max_code) return sign | overflow;
    return sign | code;
  }

  // Inputs that probe every rounding boundary: each value, each midpoint and
  // the floats just either side of it, plus the overflow region.
  std::vector<float> BoundaryInputs() const {
    std::vector<float> out;
    std::vector<double> points = values_;
    points.push_back(sentinel_);
    for (size_t i = 0; i + 1 < points.size(); ++i) {
      const float v = static_cast<float>(points[i]);
      const float mid = static_cast<float>((points[i] + points[i + 1]) / 2);
      EXPECT_EQ(static_cast<double>(mid), (points[i] + points[i + 1]) / 2) << "midpoint not exact in float";
      for (float f : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
        out.push_back(f);
        out.push_back(-f);
      }
    }
    const float s = static_cast<float>(sentinel_);
    for (float f : {s, std::nextafter(s, 0.0f), s * 2, std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()}) {
      out.push_back(f);
      out.push_back(-f);
    }
    return out;
  }

  // Random floats: uniform bit patterns (whole range) and uniform mantissas
  // over the binades this format covers.
  std::vector<float> RandomInputs(int n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<float> out;
    const int lo_exp = std::ilogb(values_[1]) - 3;
    const int hi_exp = std::ilogb(values_.back()) + 2;
    for (int i = 0; i < n; ++i) {
      out.push_back(BitsFloat(static_cast<uint32_t>(rng())));
      const int e = lo_exp + static_cast<int>(rng() % static_cast<uint64_t>(hi_exp - lo_exp + 1));
      const float m = 1.0f + static_cast<float>(rng() & 0x7fffff) / 8388608.0f;
      out.push_back((rng() & 1 ? -1.0f : 1.0f) * std::ldexp(m, e));
    }
    return out;
  }

 private:
  Format fmt_;
  std::vector<double> values_;
  double sentinel_ = 0;
};

Format E4m3Format() {
  return {"e4m3", [](uint32_t c) { return fp8_e4m3::ToFloatBits(static_cast<uint8_t>(c)); }, 0x7e, 0x80, 0x7f, 0x7f};
}
Format E5m2Format() {
  return {"e5m2", [](uint32_t c) { return fp8_e5m2::ToFloatBits(static_cast<uint8_t>(c)); }, 0x7b, 0x80, 0x7c, 0x7f};
}
Format Fp16Format() {
  return {"fp16", [](uint32_t c) { return fp16::ToFloatBits(static_cast<uint16_t>(c)); }, 0x7bff, 0x8000, 0x7c00,
          0x7e00};
}
Format Bf16Format() {
  return {"bf16", [](uint32_t c) { return bf16::FromBits(static_cast<uint16_t>(c)).ToFloat(); }, 0x7f7f, 0x8000,
          0x7f80, 0x7fc0};
}

// Checks `convert` against the reference on boundary and random inputs.
void CheckAgainstReference(const Format& fmt, const std::function<uint32_t(float, bool)>& convert,
                           bool has_saturate) {
  ReferenceRounder ref(fmt);
  std::vector<float> inputs = ref.BoundaryInputs();
  std::vector<float> random = ref.RandomInputs(200000, 42);
  inputs.insert(inputs.end(), random.begin(), random.end());
  int failures = 0;
  for (float x : inputs) {
    for (bool sat : {false, true}) {
      if (sat && !has_saturate) continue;
      const uint32_t got = convert(x, sat);
      const uint32_t want = ref.Round(x, sat);
      if (std::isnan(x)) {
        // Any NaN code with the right sign is acceptable for NaN inputs.
        EXPECT_TRUE(std::isnan(fmt.decode(got & ~fmt.sign_bit))) << fmt.name << " x=" << x;
        EXPECT_EQ(got & fmt.sign_bit, want & fmt.sign_bit) << fmt.name;
        continue;
      }
      if (got != want && ++failures <= 10) {
        ADD_FAILURE() << fmt.name << " x=" << x << " (bits 0x" << std::hex << FloatBits(x) << ") saturate=" << sat
                      << " got 0x" << got << " want 0x" << want;
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST(Float8, E4m3EveryCodeRoundTrips) {
  int nans = 0;
  for (uint32_t c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    const float f = fp8_e4m3::ToFloatBits(b);
    if (std::isnan(f)) {
      ++nans;
      EXPECT_TRUE(fp8_e4m3::IsNanBits(b));
      EXPECT_EQ(fp8_e4m3::FromFloat(f), b) << c;  // canonical NaN codes only
      continue;
    }
    EXPECT_FALSE(std::isinf(f)) << c;
    EXPECT_EQ(fp8_e4m3::FromFloat(f, false), b) << c;
    EXPECT_EQ(fp8_e4m3::FromFloat(f, true), b) << c;
    EXPECT_EQ(fp8_e4m3(f).bits, b);
  }
  EXPECT_EQ(nans, 2);
}

TEST(Float8, E5m2EveryCodeRoundTrips) {
  int nans = 0, infs = 0;
  for (uint32_t c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    const float f = fp8_e5m2::ToFloatBits(b);
    if (std::isnan(f)) {
      ++nans;
      EXPECT_TRUE(fp8_e5m2::IsNanBits(b));
      EXPECT_TRUE(fp8_e5m2::IsNanBits(fp8_e5m2::FromFloat(f)));
      EXPECT_EQ(fp8_e5m2::FromFloat(f) & 0x80, b & 0x80);
      continue;
    }
    if (std::isinf(f)) {
      ++infs;
      EXPECT_TRUE(fp8_e5m2::IsInfBits(b));
      EXPECT_EQ(fp8_e5m2::FromFloat(f, false), b);
      EXPECT_EQ(fp8_e5m2::FromFloat(f, true), (b & 0x80) | 0x7b);
      continue;
    }
    EXPECT_EQ(fp8_e5m2::FromFloat(f, false), b) << c;
    EXPECT_EQ(fp8_e5m2::FromFloat(f, true), b) << c;
  }
  EXPECT_EQ(nans, 6);
  EXPECT_EQ(infs, 2);
}

TEST(Float8, KnownValues) {
  EXPECT_EQ(fp8_e4m3::FromFloat(1.0f), 0x38);
  EXPECT_EQ(fp8_e4m3::FromFloat(-2.0f), 0xc0);
  EXPECT_EQ(fp8_e4m3::ToFloatBits(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3::ToFloatBits(0x01), fp8_e4m3::kMinSubnormal);
  EXPECT_EQ(fp8_e4m3::ToFloatBits(0x08), fp8_e4m3::kMinNormal);
  EXPECT_EQ(fp8_e4m3::ToFloatBits(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_e4m3::ToFloatBits(0x80)));
  EXPECT_EQ(fp8_e4m3::FromFloat(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3::FromFloat(464.0f), 0x7e);  // tie between 448 and (480) goes to even 448
  EXPECT_EQ(fp8_e4m3::FromFloat(464.5f), 0x7f);  // overflow -> NaN
  EXPECT_EQ(fp8_e4m3::FromFloat(464.5f, true), 0x7e);
  EXPECT_EQ(fp8_e4m3::FromFloat(-1e9f, true), 0xfe);
  EXPECT_EQ(fp8_e4m3::FromFloat(std::numeric_limits<float>::infinity()), 0x7f);
  EXPECT_EQ(fp8_e4m3::FromFloat(-std::numeric_limits<float>::infinity(), true), 0xfe);
  EXPECT_EQ(fp8_e4m3::FromFloat(std::nanf(""), true), 0x7f);
  EXPECT_EQ(fp8_e4m3::FromFloat(0.0009765625f), 0x00);  // 2^-10: tie between 0 and 2^-9 -> 0
  EXPECT_EQ(fp8_e4m3::FromFloat(0.00097657f), 0x01);
  EXPECT_EQ(fp8_e4m3::Saturated(1000.0f).ToFloat(), 448.0f);

  EXPECT_EQ(fp8_e5m2::FromFloat(1.0f), 0x3c);
  EXPECT_EQ(fp8_e5m2::ToFloatBits(0x7b), 57344.0f);
  EXPECT_EQ(fp8_e5m2::ToFloatBits(0x01), fp8_e5m2::kMinSubnormal);
  EXPECT_EQ(fp8_e5m2::ToFloatBits(0x04), fp8_e5m2::kMinNormal);
  EXPECT_EQ(fp8_e5m2::FromFloat(61440.0f), 0x7c);  // tie between 57344 and (65536) -> even -> inf
  EXPECT_EQ(fp8_e5m2::FromFloat(61439.0f), 0x7b);
  EXPECT_EQ(fp8_e5m2::FromFloat(-1e6f), 0xfc);
  EXPECT_EQ(fp8_e5m2::FromFloat(-1e6f, true), 0xfb);
  EXPECT_TRUE(fp8_e5m2(std::nanf("")).IsNan());
  EXPECT_TRUE(fp8_e5m2(1e6f).IsInf());
}

TEST(Float8, E4m3MatchesReferenceRounding) {
  CheckAgainstReference(
      E4m3Format(), [](float x, bool sat) { return uint32_t{fp8_e4m3::FromFloat(x, sat)}; }, true);
}

TEST(Float8, E5m2MatchesReferenceRounding) {
  CheckAgainstReference(
      E5m2Format(), [](float x, bool sat) { return uint32_t{fp8_e5m2::FromFloat(x, sat)}; }, true);
}

TEST(Float16, Fp16EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t b = static_cast<uint16_t>(c);
    const float f = fp16::ToFloatBits(b);
    const bool is_nan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0;
    ASSERT_EQ(std::isnan(f), is_nan) << c;
    if (is_nan) {
      const uint16_t back = fp16::FromFloat(f);
      EXPECT_TRUE(std::isnan(fp16::ToFloatBits(back))) << c;
      EXPECT_EQ(back & 0x8000, b & 0x8000) << c;
    } else {
      ASSERT_EQ(fp16::FromFloat(f), b) << c;
    }
  }
}

TEST(Float16, Bf16EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const uint16_t b = static_cast<uint16_t>(c);
    const float f = bf16::FromBits(b).ToFloat();
    EXPECT_EQ(FloatBits(f), c << 16);  // exact widening
    if (std::isnan(f)) {
      const uint16_t back = bf16::FromFloat(f);
      EXPECT_TRUE(std::isnan(bf16::FromBits(back).ToFloat())) << c;
      EXPECT_EQ(back & 0x8000, b & 0x8000) << c;
    } else {
      ASSERT_EQ(bf16::FromFloat(f), b) << c;
    }
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(fp16::FromFloat(1.0f), 0x3c00);
  EXPECT_EQ(fp16::FromFloat(65504.0f), 0x7bff);
  EXPECT_EQ(fp16::FromFloat(65519.0f), 0x7bff);
  EXPECT_EQ(fp16::FromFloat(65520.0f), 0x7c00);  // tie -> even -> inf
  EXPECT_EQ(fp16::FromFloat(-1e30f), 0xfc00);
  EXPECT_EQ(fp16::FromFloat(1.0f + 1.0f / 2048), 0x3c00);           // tie -> even
  EXPECT_EQ(fp16::FromFloat(1.0f + 3.0f / 2048), 0x3c02);           // tie -> even (up)
  EXPECT_EQ(fp16::ToFloatBits(0x0001), std::ldexp(1.0f, -24));      // smallest subnormal
  EXPECT_EQ(bf16::FromFloat(1.0f + 1.0f / 256), 0x3f80);            // tie -> even
  EXPECT_EQ(bf16::FromFloat(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_EQ(bf16::FromFloat(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_TRUE(std::isnan(bf16(std::nanf("")).ToFloat()));
  EXPECT_TRUE(std::isnan(fp16(-std::nanf("")).ToFloat()));
}

TEST(Float16, Fp16MatchesReferenceRounding) {
  CheckAgainstReference(
      Fp16Format(), [](float x, bool) { return uint32_t{fp16::FromFloat(x)}; }, false);
}

TEST(Float16, Bf16MatchesReferenceRounding) {
  CheckAgainstReference(
      Bf16Format(), [](float x, bool) { return uint32_t{bf16::FromFloat(x)}; }, false);
}

}  // namespace
}  // namespace tessera

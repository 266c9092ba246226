#include "tessera/comm/compress/codec.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "tessera/base/float16.h"
#include "tessera/base/float8.h"

namespace tessera::comm::compress {
namespace {

size_t NumBlocks(size_t n) { return (n + kBlock - 1) / kBlock; }
bool HasScales(Codec c) { return c == Codec::kFp16 || c == Codec::kInt8 || c == Codec::kFp8; }
size_t ElementBytes(Codec c) { return c == Codec::kBf16 || c == Codec::kFp16 ? 2 : 1; }

// What a block's absmax maps to in the codec's range.
float Target(Codec c) {
  switch (c) {
    case Codec::kFp16: return 1.0f;
    case Codec::kInt8: return 127.0f;
    case Codec::kFp8: return fp8_e4m3::kMax;
    default: return 1.0f;
  }
}

float AbsMax(const float* x, size_t n) {
  // The largest |x| through the bits: for non-negative floats the integer
  // order is the float order, and an integer max reduction vectorizes.
  uint32_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    u &= 0x7fffffffu;
    m = u > m ? u : m;
  }
  float f;
  std::memcpy(&f, &m, 4);
  return f;
}

// int8 code of v (already scaled): round to nearest, within ±127.
inline int8_t Int8Code(float v) {
  v = v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v);
  return static_cast<int8_t>(static_cast<int>(std::nearbyint(v)));
}

const std::array<float, 256>& Fp8Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[b] = fp8_e4m3::ToFloatBits(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kNone: return "none";
    case Codec::kBf16: return "bf16";
    case Codec::kFp16: return "fp16";
    case Codec::kInt8: return "int8";
    case Codec::kFp8: return "fp8";
    case Codec::kTopK: return "topk";
  }
  return "?";
}

StatusOr<CompressionSpec> ParseCompressionSpec(std::string_view text) {
  CompressionSpec s;
  if (text == "none" || text.empty()) return s;
  if (text == "bf16") s.codec = Codec::kBf16;
  else if (text == "fp16") s.codec = Codec::kFp16;
  else if (text == "int8") s.codec = Codec::kInt8;
  else if (text == "fp8" || text == "fp8_e4m3") s.codec = Codec::kFp8;
  else if (text.starts_with("topk:")) {
    const std::string f(text.substr(5));
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (f.empty() || end != f.c_str() + f.size() || !(v > 0.0 && v <= 1.0)) {
      return InvalidArgument("compression '{}': the top-k fraction must be a number in (0, 1], e.g. topk:0.01", text);
    }
    s.codec = Codec::kTopK;
    s.topk_fraction = v;
  } else {
    return InvalidArgument("compression '{}' must be none, bf16, fp16, int8, fp8 or topk:F (0 < F <= 1)", text);
  }
  return s;
}

std::string CompressionSpecName(const CompressionSpec& spec) {
  if (spec.codec == Codec::kTopK) return fmt::format("topk:{}", spec.topk_fraction);
  return std::string(CodecName(spec.codec));
}

size_t EncodedBytes(Codec codec, size_t n) {
  if (codec == Codec::kNone) return n * sizeof(float);
  return (HasScales(codec) ? NumBlocks(n) * sizeof(float) : 0) + n * ElementBytes(codec);
}

namespace {

// Encodes block `blk` (m elements of x) of a chunk: its scale and payload.
void EncodeBlock(Codec codec, const float* x, size_t m, size_t blk, size_t lo, uint8_t* out, uint8_t* payload) {
  const float target = Target(codec);
  const float a = AbsMax(x, m);
  const float scale = a > 0.0f ? a / target : 0.0f;  // decoded value = code * scale
  std::memcpy(out + blk * sizeof(float), &scale, sizeof(float));
  const float inv = a > 0.0f ? target / a : 0.0f;
  if (codec == Codec::kInt8) {
    int8_t* q = reinterpret_cast<int8_t*>(payload + lo);
    for (size_t i = 0; i < m; ++i) q[i] = Int8Code(x[i] * inv);
  } else if (codec == Codec::kFp8) {
    uint8_t* q = payload + lo;
    for (size_t i = 0; i < m; ++i) q[i] = fp8_e4m3::FromFloat(x[i] * inv, /*saturate=*/true);
  } else {  // fp16
    uint8_t* q = payload + 2 * lo;
    for (size_t i = 0; i < m; ++i) {
      const uint16_t h = fp16::FromFloat(x[i] * inv);
      std::memcpy(q + 2 * i, &h, 2);
    }
  }
}

}  // namespace

void Encode(Codec codec, const float* in, size_t n, uint8_t* out) {
  if (codec == Codec::kNone) {
    std::memcpy(out, in, n * sizeof(float));
    return;
  }
  if (codec == Codec::kBf16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t b = bf16::FromFloat(in[i]);
      std::memcpy(out + 2 * i, &b, 2);
    }
    return;
  }
  const size_t nb = NumBlocks(n);
  uint8_t* payload = out + nb * sizeof(float);
  for (size_t blk = 0; blk < nb; ++blk) {
    const size_t lo = blk * kBlock;
    EncodeBlock(codec, in + lo, std::min(kBlock, n - lo), blk, lo, out, payload);
  }
}

void EncodeWithFeedback(Codec codec, const float* x, float* residual, size_t n, uint8_t* out) {
  if (residual == nullptr) return Encode(codec, x, n, out);
  // Block by block, in L1: v = x + r, encode v, r = v - decode(v).
  float v[kBlock], d[kBlock];
  if (codec == Codec::kBf16 || codec == Codec::kNone) {
    for (size_t lo = 0; lo < n; lo += kBlock) {
      const size_t m = std::min(kBlock, n - lo);
      for (size_t i = 0; i < m; ++i) v[i] = x[lo + i] + residual[lo + i];
      Encode(codec, v, m, out + (codec == Codec::kNone ? 4 : 2) * lo);
      Decode(codec, out + (codec == Codec::kNone ? 4 : 2) * lo, m, d, false);
      for (size_t i = 0; i < m; ++i) residual[lo + i] = v[i] - d[i];
    }
    return;
  }
  const size_t nb = NumBlocks(n);
  uint8_t* payload = out + nb * sizeof(float);
  if (codec == Codec::kInt8) {
    // Fused: v = x + r, scale, codes and the new residual in one pass.
    for (size_t blk = 0; blk < nb; ++blk) {
      const size_t lo = blk * kBlock, m = std::min(kBlock, n - lo);
      const float* xb = x + lo;
      float* rb = residual + lo;
      for (size_t i = 0; i < m; ++i) v[i] = xb[i] + rb[i];
      const float a = AbsMax(v, m);
      const float scale = a > 0.0f ? a / 127.0f : 0.0f;
      const float inv = a > 0.0f ? 127.0f / a : 0.0f;
      std::memcpy(out + blk * sizeof(float), &scale, sizeof(float));
      int8_t* q = reinterpret_cast<int8_t*>(payload + lo);
      for (size_t i = 0; i < m; ++i) {
        const int8_t c = Int8Code(v[i] * inv);
        q[i] = c;
        rb[i] = v[i] - static_cast<float>(c) * scale;
      }
    }
    return;
  }
  const size_t eb = ElementBytes(codec);
  for (size_t blk = 0; blk < nb; ++blk) {
    const size_t lo = blk * kBlock, m = std::min(kBlock, n - lo);
    for (size_t i = 0; i < m; ++i) v[i] = x[lo + i] + residual[lo + i];
    EncodeBlock(codec, v, m, blk, lo, out, payload);
    // Decode this block alone: a one-block encoding is [scale][payload].
    uint8_t one[sizeof(float) + 2 * kBlock];
    std::memcpy(one, out + blk * sizeof(float), sizeof(float));
    std::memcpy(one + sizeof(float), payload + eb * lo, eb * m);
    Decode(codec, one, m, d, false);
    for (size_t i = 0; i < m; ++i) residual[lo + i] = v[i] - d[i];
  }
}

void Decode(Codec codec, const uint8_t* in, size_t n, float* out, bool accumulate) {
  if (codec == Codec::kNone) {
    const float* f = reinterpret_cast<const float*>(in);
    for (size_t i = 0; i < n; ++i) out[i] = accumulate ? out[i] + f[i] : f[i];
    return;
  }
  if (codec == Codec::kBf16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, in + 2 * i, 2);
      const float v = BitsFloat(static_cast<uint32_t>(b) << 16);
      out[i] = accumulate ? out[i] + v : v;
    }
    return;
  }
  const size_t nb = NumBlocks(n);
  const uint8_t* payload = in + nb * sizeof(float);
  const auto& fp8 = Fp8Table();
  for (size_t blk = 0; blk < nb; ++blk) {
    const size_t lo = blk * kBlock, m = std::min(kBlock, n - lo);
    float scale;
    std::memcpy(&scale, in + blk * sizeof(float), sizeof(float));
    float* y = out + lo;
    if (codec == Codec::kInt8) {
      const int8_t* q = reinterpret_cast<const int8_t*>(payload + lo);
      if (accumulate) {
        for (size_t i = 0; i < m; ++i) y[i] += static_cast<float>(q[i]) * scale;
      } else {
        for (size_t i = 0; i < m; ++i) y[i] = static_cast<float>(q[i]) * scale;
      }
    } else if (codec == Codec::kFp8) {
      const uint8_t* q = payload + lo;
      for (size_t i = 0; i < m; ++i) {
        const float v = fp8[q[i]] * scale;
        y[i] = accumulate ? y[i] + v : v;
      }
    } else {  // fp16
      const uint8_t* q = payload + 2 * lo;
      for (size_t i = 0; i < m; ++i) {
        uint16_t h;
        std::memcpy(&h, q + 2 * i, 2);
        const float v = fp16::ToFloatBits(h) * scale;
        y[i] = accumulate ? y[i] + v : v;
      }
    }
  }
}

double ErrorBound(Codec codec, double x, double a) {
  const double ax = std::fabs(x);
  switch (codec) {
    case Codec::kNone: return 0.0;
    case Codec::kBf16: return std::ldexp(ax, -8);
    case Codec::kFp16: return std::ldexp(ax, -11) + std::ldexp(a, -25);
    case Codec::kInt8: return a / 254.0;
    case Codec::kFp8: return std::ldexp(ax, -4) + std::ldexp(a / 448.0, -10);
    case Codec::kTopK: return ax;  // a dropped element is sent later (error feedback)
  }
  return 0.0;
}

}  // namespace tessera::comm::compress

#include "tessera/comm/moe/payload.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tessera/base/float16.h"
#include "tessera/base/float8.h"

namespace tessera::comm::moe {
namespace {

size_t Pad16(size_t n) { return (n + 15) & ~size_t{15}; }
int64_t Blocks(int64_t hidden) { return (hidden + static_cast<int64_t>(kFp8Block) - 1) / kFp8Block; }

// e4m3 -> float for all 256 codes (fp8_e4m3::ToFloatBits branches per call).
const float* E4m3Table() {
  static const auto* table = [] {
    auto* t = new float[256];
    for (int i = 0; i < 256; ++i) t[i] = fp8_e4m3::ToFloatBits(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

float Load(const void* src, DataType dtype, int64_t i) {
  if (dtype == DataType::kBFloat16) return bf16::FromBits(static_cast<const uint16_t*>(src)[i]).ToFloat();
  if (dtype == DataType::kFloat16) return fp16::FromBits(static_cast<const uint16_t*>(src)[i]).ToFloat();
  return static_cast<const float*>(src)[i];
}

}  // namespace

std::string_view PayloadName(Payload p) {
  switch (p) {
    case Payload::kFloat32: return "fp32";
    case Payload::kBFloat16: return "bf16";
    case Payload::kFloat16: return "fp16";
    case Payload::kFp8E4m3: return "fp8_e4m3";
  }
  return "?";
}

StatusOr<Payload> ParsePayload(std::string_view text) {
  if (text == "fp32" || text == "float32") return Payload::kFloat32;
  if (text == "bf16" || text == "bfloat16") return Payload::kBFloat16;
  if (text == "fp16" || text == "float16" || text == "half") return Payload::kFloat16;
  if (text == "fp8" || text == "fp8_e4m3" || text == "e4m3") return Payload::kFp8E4m3;
  return InvalidArgument("MoE payload '{}' is not one of fp32, bf16, fp8_e4m3", text);
}

size_t RowBytes(Payload p, int64_t hidden) {
  const size_t h = static_cast<size_t>(hidden);
  switch (p) {
    case Payload::kFloat32: return Pad16(h * 4);
    case Payload::kBFloat16:
    case Payload::kFloat16: return Pad16(h * 2);
    case Payload::kFp8E4m3: return Pad16(h) + Pad16(static_cast<size_t>(Blocks(hidden)) * 4);
  }
  return 0;
}

void StoreFloats(const float* v, int64_t n, DataType dtype, void* dst) {
  if (dtype == DataType::kFloat32) {
    if (dst != v && n > 0) std::memcpy(dst, v, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  auto* o = static_cast<uint16_t*>(dst);
  const bool b = dtype == DataType::kBFloat16;
  for (int64_t i = 0; i < n; ++i) o[i] = b ? bf16::FromFloat(v[i]) : fp16::FromFloat(v[i]);
}

bool IsExact(Payload p, DataType dtype) {
  return (p == Payload::kFloat32 && dtype == DataType::kFloat32) ||
         (p == Payload::kBFloat16 && dtype == DataType::kBFloat16) ||
         (p == Payload::kFloat16 && dtype == DataType::kFloat16);
}

void EncodeRow(Payload p, const void* src, DataType dtype, int64_t hidden, uint8_t* dst) {
  switch (p) {
    case Payload::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(hidden) * 4);
      return;
    case Payload::kBFloat16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      if (dtype == DataType::kBFloat16) {
        std::memcpy(out, src, static_cast<size_t>(hidden) * 2);
      } else {
        for (int64_t i = 0; i < hidden; ++i) out[i] = bf16::FromFloat(Load(src, dtype, i));
      }
      return;
    }
    case Payload::kFloat16: {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      if (dtype == DataType::kFloat16) {
        std::memcpy(out, src, static_cast<size_t>(hidden) * 2);
      } else {
        for (int64_t i = 0; i < hidden; ++i) out[i] = fp16::FromFloat(Load(src, dtype, i));
      }
      return;
    }
    case Payload::kFp8E4m3: {
      float* scales = reinterpret_cast<float*>(dst + Pad16(static_cast<size_t>(hidden)));
      for (int64_t b = 0; b < Blocks(hidden); ++b) {
        const int64_t lo = b * static_cast<int64_t>(kFp8Block);
        const int64_t hi = std::min<int64_t>(hidden, lo + static_cast<int64_t>(kFp8Block));
        float amax = 0;
        bool nan = false;
        for (int64_t i = lo; i < hi; ++i) {
          const float v = Load(src, dtype, i);
          nan |= std::isnan(v);
          amax = std::max(amax, std::fabs(v));
        }
        const float scale = nan ? NAN : amax / fp8_e4m3::kMax;
        scales[b] = scale;
        const float inv = scale > 0 ? 1.0f / scale : 0.0f;
        for (int64_t i = lo; i < hi; ++i) dst[i] = fp8_e4m3::FromFloat(Load(src, dtype, i) * inv, /*saturate=*/true);
      }
      return;
    }
  }
}

void DecodeRow(Payload p, const uint8_t* src, int64_t hidden, DataType dtype, void* dst) {
  if ((p == Payload::kFloat32 && dtype == DataType::kFloat32) ||
      (p == Payload::kBFloat16 && dtype == DataType::kBFloat16) ||
      (p == Payload::kFloat16 && dtype == DataType::kFloat16)) {
    std::memcpy(dst, src, static_cast<size_t>(hidden) * (p == Payload::kFloat32 ? 4 : 2));
    return;
  }
  auto store = [&](int64_t i, float v) {
    if (dtype == DataType::kBFloat16) {
      static_cast<uint16_t*>(dst)[i] = bf16::FromFloat(v);
    } else if (dtype == DataType::kFloat16) {
      static_cast<uint16_t*>(dst)[i] = fp16::FromFloat(v);
    } else {
      static_cast<float*>(dst)[i] = v;
    }
  };
  switch (p) {
    case Payload::kFloat32: {
      const float* in = reinterpret_cast<const float*>(src);
      for (int64_t i = 0; i < hidden; ++i) store(i, in[i]);
      return;
    }
    case Payload::kBFloat16: {
      const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < hidden; ++i) store(i, bf16::FromBits(in[i]).ToFloat());
      return;
    }
    case Payload::kFloat16: {
      const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < hidden; ++i) store(i, fp16::FromBits(in[i]).ToFloat());
      return;
    }
    case Payload::kFp8E4m3: {
      const float* scales = reinterpret_cast<const float*>(src + Pad16(static_cast<size_t>(hidden)));
      const float* table = E4m3Table();
      for (int64_t i = 0; i < hidden; ++i) store(i, table[src[i]] * scales[i / static_cast<int64_t>(kFp8Block)]);
      return;
    }
  }
}

void DecodeAccumulate(Payload p, const uint8_t* src, int64_t hidden, float* acc) {
  switch (p) {
    case Payload::kFloat32: {
      const float* in = reinterpret_cast<const float*>(src);
      for (int64_t i = 0; i < hidden; ++i) acc[i] += in[i];
      return;
    }
    case Payload::kBFloat16: {
      const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < hidden; ++i) acc[i] += bf16::FromBits(in[i]).ToFloat();
      return;
    }
    case Payload::kFloat16: {
      const uint16_t* in = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < hidden; ++i) acc[i] += fp16::FromBits(in[i]).ToFloat();
      return;
    }
    case Payload::kFp8E4m3: {
      const float* scales = reinterpret_cast<const float*>(src + Pad16(static_cast<size_t>(hidden)));
      const float* table = E4m3Table();
      for (int64_t i = 0; i < hidden; ++i) acc[i] += table[src[i]] * scales[i / static_cast<int64_t>(kFp8Block)];
      return;
    }
  }
}

void StoreOrAccumulate(Payload p, const uint8_t* src, int64_t hidden, int64_t token, std::vector<uint8_t>& stored,
                       float* sum) {
  float* acc = sum + token * hidden;
  if (stored[token]) {
    DecodeAccumulate(p, src, hidden, acc);
  } else {
    DecodeRow(p, src, hidden, DataType::kFloat32, acc);
    stored[token] = 1;
  }
}

void FillUnstored(const std::vector<uint8_t>& stored, int64_t hidden, float* sum) {
  for (size_t t = 0; t < stored.size(); ++t) {
    if (!stored[t]) std::fill(sum + t * hidden, sum + (t + 1) * hidden, 0.0f);
  }
}

void AccumulateWeighted(const void* row, DataType dtype, float weight, int64_t hidden, float* acc) {
  // (prod first, then the add: no fused multiply-add, the same bits on every path)
  if (dtype == DataType::kFloat32) {
    const float* v = static_cast<const float*>(row);
    for (int64_t i = 0; i < hidden; ++i) {
      const float prod = v[i] * weight;
      acc[i] += prod;
    }
    return;
  }
  const uint16_t* v = static_cast<const uint16_t*>(row);
  if (dtype == DataType::kBFloat16) {
    for (int64_t i = 0; i < hidden; ++i) {
      const float prod = bf16::FromBits(v[i]).ToFloat() * weight;
      acc[i] += prod;
    }
    return;
  }
  for (int64_t i = 0; i < hidden; ++i) {
    const float prod = fp16::FromBits(v[i]).ToFloat() * weight;
    acc[i] += prod;
  }
}

}  // namespace tessera::comm::moe

// Gradient codecs for compressed collectives: blockwise quantization of
// fp32 vectors into bf16, fp16, int8 or fp8 (e4m3), and the compression
// spec ("none", "bf16", "fp16", "int8", "fp8", "topk:F") that selects one.
//
// Encoded layout of n elements (a "chunk"): the block scales (fp32, one per
// kBlock = 256 elements, the last block possibly partial; absent for bf16),
// then the n quantized elements (2 bytes for bf16/fp16, 1 for int8/fp8),
// unpadded. EncodedBytes(codec, n) gives the size.
//
// Error bounds per element x of a block whose largest |x| is a (round to
// nearest; documented in docs/comm.md and checked by codec_test.cc):
//   bf16: |x - x'| <= 2^-8 |x|                          (no scale)
//   fp16: scale a;        |x - x'| <= 2^-11 |x| + 2^-25 a
//   int8: scale a/127;    |x - x'| <= a / 254
//   fp8:  scale a/448;    |x - x'| <= 2^-4 |x| + 2^-10 a/448
// Zero blocks encode with scale 0 and decode to exact zeros. Non-finite
// inputs are not supported (the result is unspecified but finite-size).
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/base/status.h"

namespace tessera::comm::compress {

enum class Codec : uint8_t { kNone, kBf16, kFp16, kInt8, kFp8, kTopK };

inline constexpr size_t kBlock = 256;

struct CompressionSpec {
  Codec codec = Codec::kNone;
  double topk_fraction = 0.0;  // kTopK: fraction of elements kept, (0, 1]
  bool error_feedback = true;  // carry the residual to the next call

  bool enabled() const { return codec != Codec::kNone; }
};

// "none", "bf16", "fp16", "int8", "fp8" (or "fp8_e4m3"), "topk:0.01".
StatusOr<CompressionSpec> ParseCompressionSpec(std::string_view text);
// The spelling ParseCompressionSpec accepts ("topk:0.01").
std::string CompressionSpecName(const CompressionSpec& spec);
std::string_view CodecName(Codec codec);

// Bytes of the encoding of n elements (dense codecs only).
size_t EncodedBytes(Codec codec, size_t n);
// Encodes n floats of `in` into `out` (EncodedBytes(codec, n) bytes).
void Encode(Codec codec, const float* in, size_t n, uint8_t* out);
// Encodes v = x + residual (n elements) and sets residual = v - decode(encoding):
// the error-feedback step fused into one pass (residual may be null: Encode).
void EncodeWithFeedback(Codec codec, const float* x, float* residual, size_t n, uint8_t* out);
// Decodes n elements from `in`: writes them to `out` (accumulate = false)
// or adds them to it (accumulate = true).
void Decode(Codec codec, const uint8_t* in, size_t n, float* out, bool accumulate);
// The documented per-element bound for x in a block whose absmax is a.
double ErrorBound(Codec codec, double x, double a);

}  // namespace tessera::comm::compress

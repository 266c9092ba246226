// Wire formats of MoE token rows (comm/moe/): how one hidden vector of
// `hidden` elements travels between ranks.
//   kFloat32: the fp32 values (input fp32 only).
//   kBFloat16: bf16, round to nearest even (|error| ≤ 2^-8·|x|).
//   kFloat16: IEEE fp16, round to nearest even (exact for fp16 input; for
//     fp32 input |error| ≤ 2^-11·|x| in fp16's normal range).
//   kFp8E4m3: e4m3 values with one fp32 scale per block of kFp8Block = 128
//     elements (DeepEP's per-128-channel scales): scale = absmax / 448, so
//     |error| ≤ 2^-4·|x| + 2^-10·scale (3 mantissa bits; the subnormal step
//     below 2^-6·scale). An all-zero block has scale 0 and decodes to 0;
//     a NaN makes its block NaN.
// A row is encoded as [payload][scales] padded to 16 bytes (RowBytes).
// Decoding writes fp32 or bf16; DecodeAccumulate adds a row into an fp32
// accumulator (combine). Thread-safe (pure functions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"

namespace tessera::comm::moe {

enum class Payload : uint8_t { kFloat32, kBFloat16, kFloat16, kFp8E4m3 };
inline constexpr size_t kFp8Block = 128;

std::string_view PayloadName(Payload p);  // "fp32", "bf16", "fp16", "fp8_e4m3"
StatusOr<Payload> ParsePayload(std::string_view text);

// fp32 values to `dtype` (kFloat32: a copy; kBFloat16 / kFloat16: rounded
// to nearest even): a combine's sums to its output.
void StoreFloats(const float* v, int64_t n, DataType dtype, void* dst);

// Whether payload `p` carries `dtype` values unchanged (fp32 / fp32,
// bf16 / bf16, fp16 / fp16): rows then travel as plain copies.
bool IsExact(Payload p, DataType dtype);

// Bytes of one encoded row (a multiple of 16).
size_t RowBytes(Payload p, int64_t hidden);

// Encodes `hidden` elements of `dtype` (kFloat32, kBFloat16 or kFloat16)
// at `src`. A kFloat32 payload needs dtype kFloat32 (checked by the caller).
void EncodeRow(Payload p, const void* src, DataType dtype, int64_t hidden, uint8_t* dst);
// Decodes into `dtype` (kFloat32, kBFloat16 or kFloat16) at `dst`.
void DecodeRow(Payload p, const uint8_t* src, int64_t hidden, DataType dtype, void* dst);
// acc[i] += decode(src)[i] (fp32 accumulator).
void DecodeAccumulate(Payload p, const uint8_t* src, int64_t hidden, float* acc);
// The source side of a combine: a token's first row is stored (decoded to
// fp32), later ones added; `first` tracks which tokens were stored.
// FillUnstored zeroes the tokens that received nothing. Summing into a
// zeroed accumulator gives the same values without the zeroing pass.
void StoreOrAccumulate(Payload p, const uint8_t* src, int64_t hidden, int64_t token, std::vector<uint8_t>& stored,
                       float* sum);
void FillUnstored(const std::vector<uint8_t>& stored, int64_t hidden, float* sum);
// acc[i] += weight · row[i] for `hidden` elements of `dtype` (kFloat32,
// kBFloat16 or kFloat16): the expert side's per-token partial sums of a
// combine (one implementation, so every path gives the same bits).
void AccumulateWeighted(const void* row, DataType dtype, float weight, int64_t hidden, float* acc);

}  // namespace tessera::comm::moe

// The blocked GEMM written as a tile program (TileLang's T.Kernel /
// T.copy / T.gemm / T.Pipelined, on CPU caches):
//   parallel   C split into a tm x tn grid of blocks, one per thread
//   shared     A's mc x kc block packed into mr-high panels (or read in
//              place), B's kc x nc block into nr-wide panels (L2-resident)
//   fragment   one mr x nr register tile per micro-kernel call (kernels.h)
//   pipeline   the K loop in kc blocks; C accumulates across them
//   epilogue   a callback on each finished strip of C while it is in cache
// Mirrored BLIS loop order (A is the broadcast operand): M blocks > K
// blocks > N blocks > A micro-panel (L1) > B micro-panel > kernel.
//   C[M,N] = alpha * op(A) @ op(B) + beta * C        (fp32, bf16 -> fp32)
//   C[M,N] = A(u8) @ B(s8) (+ C when beta != 0)      (int32; alpha = 1)
// op(X) is X or, with trans_x, X stored transposed; row-major, any pitch.
// beta == 0 never reads C. Which kernel, blocks and thread grid run comes
// from the autotuner (autotune.h) or the default heuristics; every choice
// gives the same bits (one numerics class, one K block). Arguments are
// validated by the callers (ops/matmul). Thread-safe: packing buffers are
// thread-local; calls on disjoint C are independent; inside a parallel
// region, or below kMinMacsPerThread per thread, a call runs single-threaded.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/base/float16.h"
#include "tessera/tile/kernels.h"

namespace tessera::tile {

// Multiply-adds a thread must have before a GEMM is split across threads.
inline constexpr int64_t kMinMacsPerThread = int64_t{1} << 19;

// Called once for every finished block of C (rows [row, row+rows), columns
// [col, col+cols)), right after its last K block, while it is in cache,
// with the block's values (float or int32_t, the GEMM's output type) at
// block[r*ld + c] (r, c relative to the block; ld may be 0 for a block of
// identical rows). Blocks are disjoint and together cover C; calls may come
// concurrently from threads.
struct Epilogue {
  void (*fn)(void* ctx, const void* block, int64_t ld, int64_t row, int64_t rows, int64_t col, int64_t cols);
  void* ctx;
};

template <typename TA, typename TB, typename TC>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  const TA* a = nullptr;
  int64_t lda = 0;
  const TB* b = nullptr;
  int64_t ldb = 0;
  float beta = 0.0f;
  TC* c = nullptr;  // may be null for an epilogue-only GEMM (beta 0, K in one block)
  int64_t ldc = 0;
  const Epilogue* epilogue = nullptr;
};
using F32Args = GemmArgs<float, float, float>;
using Bf16Args = GemmArgs<bf16, bf16, float>;
using U8S8Args = GemmArgs<uint8_t, int8_t, int32_t>;

struct GemmConfig {
  const KernelInfo* kernel = nullptr;
  int64_t mc = 0, nc = 0;        // M and N blocks (multiples of mr / nr)
  int tm = 1, tn = 1;            // thread grid; tm * tn threads
  std::string ToString() const;  // "f32_gemm_12x32_avx512 mc 1920 nc 512 grid 2x1"
};

// With the tuned (or default) configuration.
void Gemm(const F32Args& args);
void Gemm(const Bf16Args& args);
void Gemm(const U8S8Args& args);

// With an explicit configuration (the tuner, tests). A grid that does not
// match the team running it falls back to the default grid for that team.
void GemmWithConfig(const F32Args& args, const GemmConfig& config);
void GemmWithConfig(const Bf16Args& args, const GemmConfig& config);
void GemmWithConfig(const U8S8Args& args, const GemmConfig& config);

// Tests only: the autotuner's search asks `timer` for a candidate's seconds
// instead of timing it (nullptr: time for real). Not thread-safe.
using TuneTimerForTesting = double (*)(const GemmConfig& config);
void SetTuneTimerForTesting(TuneTimerForTesting timer);

// The configuration Gemm() would use (tuned, cached or default), and the
// default heuristics alone.
GemmConfig ChosenConfig(const F32Args& args);
GemmConfig ChosenConfig(const Bf16Args& args);
GemmConfig ChosenConfig(const U8S8Args& args);
GemmConfig DefaultConfig(GemmType type, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, int64_t lda,
                         int threads);

// Threads a GEMM of this size runs on when called here (1 inside a
// parallel region or when small).
int GemmThreads(int64_t m, int64_t n, int64_t k);

// Whether K fits in one K block of the default kernel of `type`: then c may
// be null (beta 0 and an epilogue; C is never materialized).
bool FitsOneKBlock(GemmType type, int64_t k);

}  // namespace tessera::tile

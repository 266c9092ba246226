// Internal to ops/conv: the validated geometry of one convolution and the
// kernels behind ops::Conv2d / Conv2dBackward (one file per algorithm).
// Every kernel takes contiguous fp32 buffers in the layout named by the
// geometry (x and grad_x [N,C,H,W] or [N,H,W,C]; y and grad_y [N,K,P,Q] or
// [N,P,Q,K]; w and grad_w [K, C/G, R, S]) and writes every element of its
// outputs (no zero-filled inputs are needed). Forward kernels add bias when
// it is non-null. Each output element is computed by one thread with a fixed
// summation order, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "tessera/ops/common/image_layout.h"

namespace tessera::ops::conv {

struct ConvGeom {
  int64_t N, C, H, W;  // input
  int64_t K, R, S;     // filters
  int64_t P, Q;        // output
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t G, Cg, Kg;  // groups, channels and filters per group
  ImageLayout layout;

  bool nchw() const { return layout == ImageLayout::kNCHW; }
  int64_t x_numel() const { return N * C * H * W; }
  int64_t y_numel() const { return N * K * P * Q; }
  int64_t w_numel() const { return K * Cg * R * S; }
  double flops() const { return 2.0 * N * K * P * Q * Cg * R * S; }
  bool is_1x1() const { return R == 1 && S == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
  bool is_depthwise() const { return G == C && Cg == 1 && G > 1; }
  // What ops/conv/winograd.h computes (its padding limit included).
  bool is_winograd_shape() const {
    return R == 3 && S == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && G == 1 && ph <= 2 && pw <= 2;
  }
};

// A thread-local fp32 buffer of at least n floats, grown once and reused
// (uninitialized); `slot` in [0, 4) selects independent buffers.
float* ConvScratch(int slot, int64_t n);

// Direct loops (the reference): any geometry, both layouts.
void DirectForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void DirectBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx);
void DirectBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw);

// grad_bias[k] = sum over n, p, q of grad_y (any algorithm).
void BiasBackward(const ConvGeom& g, const float* gy, float* gb);

// im2col + GEMM: any geometry.
void Im2colForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void Im2colBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx);
void Im2colBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw);

// 1x1, stride 1, no padding: plain GEMMs on the activations.
void Gemm1x1Forward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void Gemm1x1BackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx);
void Gemm1x1BackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw);

// Depthwise (G == C, K = C * multiplier).
void DepthwiseForward(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void DepthwiseBackwardX(const ConvGeom& g, const float* gy, const float* w, float* gx);
void DepthwiseBackwardW(const ConvGeom& g, const float* gy, const float* x, float* gw);

}  // namespace tessera::ops::conv

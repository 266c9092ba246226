// 2-d convolution (cross-correlation, as PyTorch's conv2d), forward and both
// backward passes, fp32.
//   x: [N, C, H, W] (NCHW) or [N, H, W, C] (NHWC), any strides (non-
//      contiguous inputs are copied); w: [K, C/groups, R, S] always;
//   bias: [K] or undefined; y: [N, K, P, Q] / [N, P, Q, K] in x's layout,
//   P = WindowOutputSize(H, R, stride_h, pad_h, dilation_h), Q likewise.
// Algorithms (Conv2dAlgo): a direct loop nest (the reference and small
// layers), im2col + GEMM, 1x1 as a plain GEMM (stride 1, no padding),
// depthwise (groups == C == K/multiplier), and Winograd F(2x2,3x3) /
// F(4x4,3x3) for 3x3, stride-1, dilation-1, groups-1 layers with padding
// <= 2 (ops/conv/winograd.h; its error bound: docs/winograd.md; grad_x too,
// grad_w runs im2col). kAuto, under TESSERA_TUNE=1 (the default), times
// the applicable algorithms on the first layer of a geometry class with
// >= 2^22 multiply-adds and caches the fastest (conv_tune.h); otherwise,
// and under TESSERA_TUNE=0, it picks by shape: depthwise, 1x1 GEMM, direct
// for tiny problems, Winograd F(4x4,3x3) for 3x3 layers with >= 8 input
// and output channels (measured faster down to 4 channels, docs/conv.md),
// else im2col;
// TESSERA_DEBUG=DEBUG logs the algorithm that ran. Design: docs/conv.md.
// Forcing an algorithm that does not apply to the shape throws OpError, as
// do bad shapes, dtypes, groups that do not divide C and K, or an empty
// output. Under ops::UseReference() every call runs the direct loops (the
// oracle). Results do not depend on the thread count. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/ops/common/image_layout.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops {

enum class Conv2dAlgo { kAuto, kDirect, kIm2col, kGemm1x1, kDepthwise, kWinograd2x2, kWinograd4x4 };
const char* Conv2dAlgoName(Conv2dAlgo algo);  // "direct", "im2col", "gemm1x1", ...

struct Conv2dOptions {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  ImageLayout layout = ImageLayout::kNCHW;
  Conv2dAlgo algo = Conv2dAlgo::kAuto;
};

Tensor Conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& options);

struct Conv2dGrads {
  Tensor grad_x;     // x's shape and layout (undefined unless need_x)
  Tensor grad_w;     // [K, C/groups, R, S] (undefined unless need_w)
  Tensor grad_bias;  // [K] (undefined unless need_bias)
};
Conv2dGrads Conv2dBackward(const Tensor& grad_y, const Tensor& x, const Tensor& w, const Conv2dOptions& options,
                           bool need_x = true, bool need_w = true, bool need_bias = false);

// The algorithm kAuto would run for this problem (for logs, tests, benches;
// may run the tuner's search, as the first kAuto call would).
Conv2dAlgo ChooseConv2dAlgo(const Shape& x_shape, const Shape& w_shape, const Conv2dOptions& options);

}  // namespace tessera::ops

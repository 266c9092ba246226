// ops::Conv2d / Conv2dBackward: argument checks, the algorithm resolution
// (forced, or kAuto: conv_tune.h) and the run (conv_algos.h).
#include "tessera/ops/conv/conv.h"

#include <fmt/format.h>

#include "tessera/base/error.h"
#include "tessera/base/logging.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/conv/conv_algos.h"
#include "tessera/ops/conv/conv_internal.h"
#include "tessera/ops/conv/conv_tune.h"

namespace tessera::ops {

const char* Conv2dAlgoName(Conv2dAlgo algo) {
  switch (algo) {
    case Conv2dAlgo::kAuto: return "auto";
    case Conv2dAlgo::kDirect: return "direct";
    case Conv2dAlgo::kIm2col: return "im2col";
    case Conv2dAlgo::kGemm1x1: return "gemm1x1";
    case Conv2dAlgo::kDepthwise: return "depthwise";
    case Conv2dAlgo::kWinograd2x2: return "winograd2x2";
    case Conv2dAlgo::kWinograd4x4: return "winograd4x4";
  }
  return "unknown";
}

namespace {

using conv::ConvGeom;

std::string Describe(const Shape& x, const Shape& w, const Conv2dOptions& o) {
  return fmt::format(
      "x {} ({}), w {}, stride ({}, {}), pad ({}, {}), dilation "
      "({}, {}), groups {}",
      ShapeString(x), ImageLayoutName(o.layout), ShapeString(w), o.stride_h, o.stride_w, o.pad_h, o.pad_w, o.dilation_h,
      o.dilation_w, o.groups);
}

ConvGeom MakeGeom(const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  TESSERA_OP_CHECK(xs.size() == 4, "conv2d: x must be 4-d ({}), got {}",
                   o.layout == ImageLayout::kNCHW ? "[N, C, H, W] for NCHW" : "[N, H, W, C] for NHWC", ShapeString(xs));
  TESSERA_OP_CHECK(ws.size() == 4, "conv2d: w must be 4-d [K, C/groups, R, S], got {}", ShapeString(ws));
  TESSERA_OP_CHECK(o.stride_h >= 1 && o.stride_w >= 1, "conv2d: stride must be >= 1, got ({}, {})", o.stride_h,
                   o.stride_w);
  TESSERA_OP_CHECK(o.dilation_h >= 1 && o.dilation_w >= 1, "conv2d: dilation must be >= 1, got ({}, {})", o.dilation_h,
                   o.dilation_w);
  TESSERA_OP_CHECK(o.pad_h >= 0 && o.pad_w >= 0, "conv2d: padding must be >= 0, got ({}, {})", o.pad_h, o.pad_w);
  TESSERA_OP_CHECK(o.groups >= 1, "conv2d: groups must be >= 1, got {}", o.groups);
  ConvGeom g{};
  g.layout = o.layout;
  g.N = xs[0];
  if (o.layout == ImageLayout::kNCHW) {
    g.C = xs[1], g.H = xs[2], g.W = xs[3];
  } else {
    g.H = xs[1], g.W = xs[2], g.C = xs[3];
  }
  g.K = ws[0], g.R = ws[2], g.S = ws[3];
  g.G = o.groups;
  g.sh = o.stride_h, g.sw = o.stride_w, g.ph = o.pad_h, g.pw = o.pad_w, g.dh = o.dilation_h, g.dw = o.dilation_w;
  TESSERA_OP_CHECK(g.C > 0 && g.K > 0 && g.R > 0 && g.S > 0, "conv2d: empty channels or filters: {}",
                   Describe(xs, ws, o));
  TESSERA_OP_CHECK(g.C % g.G == 0 && g.K % g.G == 0, "conv2d: groups {} must divide C = {} and K = {}: {}", g.G, g.C,
                   g.K, Describe(xs, ws, o));
  g.Cg = g.C / g.G;
  g.Kg = g.K / g.G;
  TESSERA_OP_CHECK(ws[1] == g.Cg, "conv2d: w must be [K, C/groups, R, S] = [{}, {}, R, S], got {}: {}", g.K, g.Cg,
                   ShapeString(ws), Describe(xs, ws, o));
  g.P = WindowOutputSize(g.H, g.R, g.sh, g.ph, g.dh);
  g.Q = WindowOutputSize(g.W, g.S, g.sw, g.pw, g.dw);
  TESSERA_OP_CHECK(g.N > 0 && g.P > 0 && g.Q > 0, "conv2d: empty output [N, P, Q] = [{}, {}, {}]: {}", g.N, g.P, g.Q,
                   Describe(xs, ws, o));
  return g;
}

// The algorithm that runs: the forced one (checked against the shape) or
// AutoAlgo's choice. Throws for one that does not apply.
Conv2dAlgo Resolve(const ConvGeom& g, Conv2dAlgo algo, const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  if (algo == Conv2dAlgo::kAuto) return conv::AutoAlgo(g);
  if (conv::Applies(algo, g)) return algo;
  switch (algo) {
    case Conv2dAlgo::kGemm1x1:
      throw OpError(
          fmt::format("conv2d: algorithm gemm1x1 needs a 1x1 filter, "
                      "stride 1 and no padding: {}",
                      Describe(xs, ws, o)));
    case Conv2dAlgo::kDepthwise:
      throw OpError(fmt::format("conv2d: algorithm depthwise needs groups == C > 1: {}", Describe(xs, ws, o)));
    case Conv2dAlgo::kWinograd2x2:
    case Conv2dAlgo::kWinograd4x4:
      throw OpError(
          fmt::format("conv2d: algorithm {} needs a 3x3 filter, stride "
                      "1, dilation 1, groups 1 and padding <= 2: {}",
                      Conv2dAlgoName(algo), Describe(xs, ws, o)));
    default: throw OpError("conv2d: unknown algorithm");
  }
}

void CheckF32(const Tensor& t, const char* what) {
  TESSERA_OP_CHECK(t.dtype() == DType::kF32, "conv2d: {} must be float32, got {} {}", what, DTypeName(t.dtype()),
                   ShapeString(t.shape()));
}

Shape OutputShape(const ConvGeom& g) { return g.nchw() ? Shape{g.N, g.K, g.P, g.Q} : Shape{g.N, g.P, g.Q, g.K}; }

}  // namespace

Conv2dAlgo ChooseConv2dAlgo(const Shape& x_shape, const Shape& w_shape, const Conv2dOptions& options) {
  return conv::AutoAlgo(MakeGeom(x_shape, w_shape, options));
}

Tensor Conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& options) {
  TESSERA_OP_CHECK(x.defined() && w.defined(), "conv2d: x and w must be defined");
  CheckF32(x, "x");
  CheckF32(w, "w");
  const ConvGeom g = MakeGeom(x.shape(), w.shape(), options);
  if (bias.defined()) {
    CheckF32(bias, "bias");
    TESSERA_OP_CHECK(bias.dim() == 1 && bias.size(0) == g.K, "conv2d: bias must be [K] = [{}], got {}", g.K,
                     ShapeString(bias.shape()));
  }
  // Under the reference every call runs the direct loops (a forced
  // algorithm is still checked against the shape).
  Conv2dAlgo algo = Conv2dAlgo::kDirect;
  if (!UseReference() || options.algo != Conv2dAlgo::kAuto)
    algo = Resolve(g, options.algo, x.shape(), w.shape(), options);
  if (UseReference()) algo = Conv2dAlgo::kDirect;
  TLOG(DEBUG, "conv2d: {} for {}", Conv2dAlgoName(algo), Describe(x.shape(), w.shape(), options));

  const Tensor xc = x.Contiguous(), wc = w.Contiguous();
  const Tensor bc = bias.defined() ? bias.Contiguous() : Tensor();
  const float* xp = xc.data<float>();
  const float* wp = wc.data<float>();
  const float* bp = bc.defined() ? bc.data<float>() : nullptr;
  Tensor y = Tensor::Empty(OutputShape(g));
  float* yp = y.data<float>();
  conv::RunForward(algo, g, xp, wp, bp, yp);
  return y;
}

Conv2dGrads Conv2dBackward(const Tensor& grad_y, const Tensor& x, const Tensor& w, const Conv2dOptions& options,
                           bool need_x, bool need_w, bool need_bias) {
  TESSERA_OP_CHECK(grad_y.defined() && x.defined() && w.defined(), "conv2d backward: grad_y, x and w must be defined");
  CheckF32(grad_y, "grad_y");
  CheckF32(x, "x");
  CheckF32(w, "w");
  const ConvGeom g = MakeGeom(x.shape(), w.shape(), options);
  const Shape y_shape = OutputShape(g);
  TESSERA_OP_CHECK(grad_y.shape() == y_shape, "conv2d backward: grad_y must be {} ({}), got {}: {}",
                   ShapeString(y_shape), ImageLayoutName(options.layout), ShapeString(grad_y.shape()),
                   Describe(x.shape(), w.shape(), options));
  // Under the reference every call runs the direct loops (a forced
  // algorithm is still checked against the shape).
  Conv2dAlgo algo = Conv2dAlgo::kDirect;
  if (!UseReference() || options.algo != Conv2dAlgo::kAuto)
    algo = Resolve(g, options.algo, x.shape(), w.shape(), options);
  if (UseReference()) algo = Conv2dAlgo::kDirect;
  TLOG(DEBUG, "conv2d backward: {} for {} (grad x {}, w {}, bias {})", Conv2dAlgoName(algo),
       Describe(x.shape(), w.shape(), options), need_x, need_w, need_bias);

  const Tensor gyc = grad_y.Contiguous();
  const float* gyp = gyc.data<float>();
  Conv2dGrads out;
  if (need_x) {
    const Tensor wc = w.Contiguous();
    out.grad_x = Tensor::Empty(x.shape());
    float* gx = out.grad_x.data<float>();
    conv::RunBackwardX(algo, g, gyp, wc.data<float>(), gx);
  }
  if (need_w) {
    const Tensor xc = x.Contiguous();
    out.grad_w = Tensor::Empty(w.shape());
    float* gw = out.grad_w.data<float>();
    conv::RunBackwardW(algo, g, gyp, xc.data<float>(), gw);
  }
  if (need_bias) {
    out.grad_bias = Tensor::Empty({g.K});
    conv::BiasBackward(g, gyp, out.grad_bias.data<float>());
  }
  return out;
}

}  // namespace tessera::ops

// Lowerings of convolution, pooling, normalization and Dropout onto
// graph:: functions (onnx/lower/lower.h). Windows are read by the same code
// as the interpreter's kernels (ops/nn/nn_util.h), so both agree on
// kernel_shape, strides, dilations, pads and auto_pad.
#include "tessera/graph/functional.h"
#include "tessera/graph/functional_cnn.h"
#include "tessera/onnx/lower/lower.h"
#include "tessera/onnx/op.h"
#include "tessera/onnx/ops/nn/nn_util.h"

namespace tessera::onnx::lower {
namespace {

// The nn_util readers take an OpContext for the node's attributes and errors.
OpContext AttrContext(const LowerContext& ctx) { return OpContext(ctx.node(), ctx.opset(), {}, nullptr, nullptr); }

Status CheckSymmetric(const LowerContext& ctx, const nn::Window& w) {
  if (w.pads_begin != w.pads_end) {
    return ctx.Error("asymmetric pads {} / {} are not supported for training", ShapeString(w.pads_begin),
                     ShapeString(w.pads_end));
  }
  return Status::Ok();
}

Status ConvLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor w, ctx.float_tensor(1));
  if (x.dim() != 4)
    return ctx.Error("only 2-D convolution (a 4-D input) is differentiable here, got {}", ShapeString(x.shape()));
  const OpContext attrs = AttrContext(ctx);
  TESSERA_ASSIGN_OR_RETURN(nn::ConvShape s, nn::ReadConvShape(attrs, x.shape(), w.shape()));
  TESSERA_RETURN_IF_ERROR(CheckSymmetric(ctx, s.win));
  Tensor b;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(b, ctx.float_tensor(2));
  }
  ops::Conv2dOptions o;
  o.stride_h = s.win.strides[0];
  o.stride_w = s.win.strides[1];
  o.dilation_h = s.win.dilations[0];
  o.dilation_w = s.win.dilations[1];
  o.pad_h = s.win.pads_begin[0];
  o.pad_w = s.win.pads_begin[1];
  o.groups = s.group;
  ctx.set_output(0, graph::Conv2d(x, w, b, o));
  return Status::Ok();
}

// MaxPool / AveragePool (2-D, no dilation; AveragePool's count_include_pad
// defaults to 0 in ONNX).
Lowering Pool(bool max) {
  return [max](LowerContext& ctx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
    if (x.dim() != 4) return ctx.Error("only 2-D pooling (a 4-D input) is differentiable here");
    if (ctx.output_wanted(1)) return ctx.Error("the Indices output is not supported for training");
    const OpContext attrs = AttrContext(ctx);
    TESSERA_ASSIGN_OR_RETURN(nn::Window w, nn::ReadWindow(attrs, {x.size(2), x.size(3)}, {}, true));
    TESSERA_RETURN_IF_ERROR(CheckSymmetric(ctx, w));
    if (w.dilations[0] != 1 || w.dilations[1] != 1) return ctx.Error("dilated pooling is not supported for training");
    TESSERA_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.node().Int("ceil_mode", 0));
    TESSERA_ASSIGN_OR_RETURN(int64_t include_pad, ctx.node().Int("count_include_pad", 0));
    ops::Pool2dOptions o;
    o.kernel_h = w.kernel[0];
    o.kernel_w = w.kernel[1];
    o.stride_h = w.strides[0];
    o.stride_w = w.strides[1];
    o.pad_h = w.pads_begin[0];
    o.pad_w = w.pads_begin[1];
    o.ceil_mode = ceil_mode != 0;
    o.count_include_pad = include_pad != 0;
    Tensor y = max ? graph::MaxPool2d(x, o) : graph::AvgPool2d(x, o);
    if (y.size(2) != w.out[0] || y.size(3) != w.out[1]) {
      return ctx.Error("pooled size {}x{} differs from ONNX's {}x{}", y.size(2), y.size(3), w.out[0], w.out[1]);
    }
    ctx.set_output(0, y);
    return Status::Ok();
  };
}

Status GlobalAveragePoolLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  if (x.dim() != 4) return ctx.Error("only a 4-D input is differentiable here, got {}", ShapeString(x.shape()));
  ctx.set_output(0, graph::Reshape(graph::GlobalAvgPool2d(x, ops::ImageLayout::kNCHW), {x.size(0), x.size(1), 1, 1}));
  return Status::Ok();
}

// BatchNormalization over NCHW: batch statistics and a running-statistics
// update in training mode (ONNX's momentum weighs the old running value,
// Tessera's the new batch one; the running variance follows the biased
// batch variance, as ONNX says), the running statistics otherwise.
Status BatchNormLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor scale, ctx.float_tensor(1));
  TESSERA_ASSIGN_OR_RETURN(Tensor bias, ctx.float_tensor(2));
  TESSERA_ASSIGN_OR_RETURN(Tensor mean, ctx.float_tensor(3));
  TESSERA_ASSIGN_OR_RETURN(Tensor var, ctx.float_tensor(4));
  if (x.dim() != 4) return ctx.Error("only a 4-D (NCHW) input is differentiable here, got {}", ShapeString(x.shape()));
  TESSERA_ASSIGN_OR_RETURN(float eps, ctx.node().Float("epsilon", 1e-5f));
  TESSERA_ASSIGN_OR_RETURN(float momentum, ctx.node().Float("momentum", 0.9f));
  // A node exported with training_mode = 1 (opset 14+) computes with batch
  // statistics whatever the model's mode, as ONNX defines it.
  TESSERA_ASSIGN_OR_RETURN(int64_t training_mode, ctx.node().Int("training_mode", 0));
  ops::BatchNormOptions o;
  o.training = ctx.training() || training_mode != 0;
  o.eps = eps;
  o.momentum = 1.0f - momentum;
  o.unbiased_running_var = false;  // ONNX's running variance follows the biased batch variance
  ctx.set_output(0, graph::BatchNorm2d(x, scale, bias, mean, var, o));
  if (ctx.output_wanted(1)) ctx.set_output(1, mean);  // running statistics (updated in place)
  if (ctx.output_wanted(2)) ctx.set_output(2, var);
  return Status::Ok();
}

// LayerNormalization (opset 17) over the axes from `axis` on.
Status LayerNormLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Tensor scale, ctx.float_tensor(1));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", -1));
  TESSERA_ASSIGN_OR_RETURN(float eps, ctx.node().Float("epsilon", 1e-5f));
  TESSERA_ASSIGN_OR_RETURN(int axis, Axis(ctx, axis_attr, x.dim()));
  if (ctx.output_wanted(1) || ctx.output_wanted(2)) return ctx.Error("the Mean / InvStdDev outputs are not supported");
  // Normalizing over axes [axis, rank) is normalizing over one flattened last axis.
  const Shape& s = x.shape();
  Shape flat(s.begin(), s.begin() + axis);
  int64_t inner = 1;
  for (int d = axis; d < x.dim(); ++d) inner *= s[static_cast<size_t>(d)];
  flat.push_back(inner);
  if (scale.numel() != inner) {
    return ctx.Error("Scale has {} elements, the normalized axes {}", scale.numel(), inner);
  }
  Tensor bias;
  if (ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(bias, ctx.float_tensor(2));
    if (bias.numel() != inner) return ctx.Error("B has {} elements, the normalized axes {}", bias.numel(), inner);
    bias = graph::Reshape(bias, {inner});
  } else {
    bias = Tensor::Zeros({inner});
  }
  const Tensor y = graph::LayerNorm(graph::Reshape(x, flat), graph::Reshape(scale, {inner}), bias, eps);
  ctx.set_output(0, graph::Reshape(y, s));
  return Status::Ok();
}

// Dropout is the identity unless its training_mode input is true (ONNX);
// a random mask would make the graph's replays differ, so that is refused.
Status DropoutLowering(LowerContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Tensor x, ctx.float_tensor(0));
  bool training = false;
  if (ctx.opset() >= 12 && ctx.has_input(2)) {
    TESSERA_ASSIGN_OR_RETURN(Array mode, ctx.constant(2));
    training = mode.numel() > 0 && mode.GetInt(0) != 0;
  }
  if (training) return ctx.Error("Dropout in training mode is not supported (random masks); set training_mode false");
  if (ctx.output_wanted(1)) return ctx.Error("the mask output is not supported");
  ctx.set_output(0, x);
  return Status::Ok();
}

}  // namespace

void AddNnLowerings(LoweringTable& t) {
  t["Conv"] = ConvLowering;
  t["MaxPool"] = Pool(true);
  t["AveragePool"] = Pool(false);
  t["GlobalAveragePool"] = GlobalAveragePoolLowering;
  t["BatchNormalization"] = BatchNormLowering;
  t["LayerNormalization"] = LayerNormLowering;
  t["Dropout"] = DropoutLowering;
}

}  // namespace tessera::onnx::lower

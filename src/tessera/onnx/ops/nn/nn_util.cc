// Window geometry, tap offsets, conv / matmul shape checks and Tensor bridging
// shared by the nn and quant kernels.
#include "tessera/onnx/ops/nn/nn_util.h"

#include <algorithm>
#include <cstring>

namespace tessera::onnx::nn {

StatusOr<Window> ReadWindow(const OpContext& ctx, const std::vector<int64_t>& in_spatial, std::vector<int64_t> kernel,
                            bool allow_ceil) {
  const Node& node = ctx.node();
  const size_t r = in_spatial.size();
  Window w;
  w.in = in_spatial;
  TESSERA_ASSIGN_OR_RETURN(w.kernel, node.Ints("kernel_shape", kernel));
  if (w.kernel.size() != r) return ctx.Error("kernel_shape has {} entries, expected {}", w.kernel.size(), r);
  TESSERA_ASSIGN_OR_RETURN(w.strides, node.Ints("strides", std::vector<int64_t>(r, 1)));
  TESSERA_ASSIGN_OR_RETURN(w.dilations, node.Ints("dilations", std::vector<int64_t>(r, 1)));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> pads, node.Ints("pads", std::vector<int64_t>(2 * r, 0)));
  TESSERA_ASSIGN_OR_RETURN(std::string auto_pad, node.String("auto_pad", "NOTSET"));
  int64_t ceil_mode = 0;
  if (allow_ceil) {
    TESSERA_ASSIGN_OR_RETURN(ceil_mode, node.Int("ceil_mode", 0));
  }
  if (w.strides.size() != r || w.dilations.size() != r || pads.size() != 2 * r) {
    return ctx.Error("strides / dilations / pads sizes do not match {} spatial axes", r);
  }
  w.pads_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(r));
  w.pads_end.assign(pads.begin() + static_cast<int64_t>(r), pads.end());
  w.out.resize(r);
  for (size_t i = 0; i < r; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0 || w.pads_begin[i] < 0 || w.pads_end[i] < 0) {
      return ctx.Error("invalid window on axis {}: kernel {}, stride {}, dilation {}, pads {}/{}", i, w.kernel[i],
                       w.strides[i], w.dilations[i], w.pads_begin[i], w.pads_end[i]);
    }
    if (w.kernel[i] > (int64_t{1} << 31) || w.dilations[i] > (int64_t{1} << 31)) return ctx.Error("window too large");
    const int64_t dk = (w.kernel[i] - 1) * w.dilations[i] + 1, s = w.strides[i], in = w.in[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      w.out[i] = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * s + dk - in);
      const int64_t small = total / 2, big = total - small;
      w.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
      w.pads_end[i] = auto_pad == "SAME_UPPER" ? big : small;
    } else if (auto_pad == "VALID") {
      w.pads_begin[i] = w.pads_end[i] = 0;
      if (in < dk) return ctx.Error("window {} larger than input {} on axis {}", dk, in, i);
      w.out[i] = (in - dk) / s + 1;
    } else if (auto_pad == "NOTSET" || auto_pad.empty()) {
      const int64_t span = in + w.pads_begin[i] + w.pads_end[i] - dk;
      if (span < 0) return ctx.Error("window {} larger than padded input {} on axis {}", dk, span + dk, i);
      w.out[i] = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      // A last window starting in the end padding is dropped (as PyTorch / onnxruntime).
      if (ceil_mode && (w.out[i] - 1) * s >= in + w.pads_begin[i]) --w.out[i];
    } else {
      return ctx.Error("unknown auto_pad '{}'", auto_pad);
    }
  }
  return w;
}

void TapOffsets(const Window& w, const std::vector<int64_t>& out_coord, std::vector<int64_t>& offsets) {
  const size_t r = w.in.size();
  const int64_t k_size = Numel(w.kernel);
  offsets.assign(static_cast<size_t>(k_size), 0);
  std::vector<int64_t> k(r, 0);
  for (int64_t t = 0; t < k_size; ++t, NextCoord(k, w.kernel)) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) {
      const int64_t p = out_coord[d] * w.strides[d] - w.pads_begin[d] + k[d] * w.dilations[d];
      if (p < 0 || p >= w.in[d]) {
        off = -1;
        break;
      }
      off = off * w.in[d] + p;
    }
    offsets[static_cast<size_t>(t)] = off;
  }
}

StatusOr<ConvShape> ReadConvShape(const OpContext& ctx, const std::vector<int64_t>& x_shape,
                                  const std::vector<int64_t>& w_shape) {
  if (x_shape.size() < 3) return ctx.Error("input must be N x C x D1..., got rank {}", x_shape.size());
  if (w_shape.size() != x_shape.size()) {
    return ctx.Error("weight rank {} does not match input rank {}", w_shape.size(), x_shape.size());
  }
  ConvShape s;
  s.n = x_shape[0];
  s.c = x_shape[1];
  s.m = w_shape[0];
  TESSERA_ASSIGN_OR_RETURN(s.group, ctx.node().Int("group", 1));
  if (s.group <= 0 || s.c % s.group != 0 || s.m % s.group != 0) {
    return ctx.Error("group {} must divide input channels {} and output channels {}", s.group, s.c, s.m);
  }
  if (w_shape[1] != s.c / s.group) {
    return ctx.Error("weight has {} input channels, expected C/group = {}", w_shape[1], s.c / s.group);
  }
  std::vector<int64_t> in(x_shape.begin() + 2, x_shape.end()), k(w_shape.begin() + 2, w_shape.end());
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ctx.node().Ints("kernel_shape", k));
  if (ks != k) return ctx.Error("kernel_shape does not match the weight's spatial shape");
  TESSERA_ASSIGN_OR_RETURN(s.win, ReadWindow(ctx, in, k, false));
  return s;
}

std::vector<int64_t> ConvOutShape(const ConvShape& s) {
  std::vector<int64_t> out = {s.n, s.m};
  out.insert(out.end(), s.win.out.begin(), s.win.out.end());
  return out;
}

StatusOr<MatMulShape> ReadMatMulShape(const OpContext& ctx, const std::vector<int64_t>& a_in,
                                      const std::vector<int64_t>& b_in) {
  if (a_in.empty() || b_in.empty()) return ctx.Error("MatMul operands must have rank >= 1");
  MatMulShape s;
  std::vector<int64_t> a = a_in, b = b_in;
  if (a.size() == 1) {
    a.insert(a.begin(), 1);
    s.a_vec = true;
  }
  if (b.size() == 1) {
    b.push_back(1);
    s.b_vec = true;
  }
  s.m = a[a.size() - 2];
  s.k = a[a.size() - 1];
  s.n = b[b.size() - 1];
  if (b[b.size() - 2] != s.k) return ctx.Error("inner dimensions differ: {} vs {}", s.k, b[b.size() - 2]);
  const std::vector<int64_t> ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = BroadcastShapes(ab, bb);
  if (!batch.ok()) return ctx.Error("batch dimensions do not broadcast: {}", batch.status().message());
  s.a_batch = BroadcastIndex(ab, *batch);
  s.b_batch = BroadcastIndex(bb, *batch);
  s.out = *batch;
  if (!s.a_vec) s.out.push_back(s.m);
  if (!s.b_vec) s.out.push_back(s.n);
  return s;
}

Tensor ToTensor(const Array& a) {
  Tensor t = Tensor::Empty(a.shape(), DType::kF32);
  if (a.numel() > 0) std::memcpy(t.data<float>(), a.data<float>(), a.nbytes());
  return t;
}

Array FromTensor(const Tensor& t) {
  const Tensor c = t.To(DType::kF32).Contiguous();
  Array a(ElemType::kFloat, c.shape());
  if (a.numel() > 0) std::memcpy(a.data<float>(), c.data<float>(), a.nbytes());
  return a;
}

}  // namespace tessera::onnx::nn

// Internal to TrainableModel (onnx/trainable.h): rewrites of a model's main
// graph before lowering, in the manner of ONNX Runtime's graph transformers.
//
// LayerNorm fusion: exporters before opset 17 (torch.onnx.export at 13–16)
// write nn.LayerNorm as nine nodes —
//   m = ReduceMean(x, axes=[-1]); d = Sub(x, m); p = Pow(d, 2);
//   v = ReduceMean(p, axes=[-1]); e = Add(v, eps); s = Sqrt(e);
//   n = Div(d, s); y = Mul(n, gamma); z = Add(y, beta)
// — which FuseLayerNorm replaces by one LayerNormalization(x, gamma, beta,
// epsilon=eps) node (one fused kernel forward and backward instead of nine
// passes). It fires only when every intermediate is read by the pattern
// alone (and is no graph output), the exponent and eps are constants, and
// gamma / beta are float initializers or Constant outputs (directly or
// through Identity nodes, as exporters share equal initializers); Mul / Add
// operands may come in either order. The result is the same function (to
// float rounding: the fused kernel computes mean and variance in one pass).
#pragma once

#include <map>
#include <string>

#include "tessera/onnx/graph.h"

namespace tessera::onnx::lower {

// Rewrites `g` in place; returns how many LayerNorms were fused.
// `constants` holds the values of Constant nodes' outputs (by name).
int FuseLayerNorm(Graph& g, const std::map<std::string, Array>& constants);

}  // namespace tessera::onnx::lower

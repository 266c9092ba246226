// Differentiable image operators for CNNs (conv, pooling, batch norm), in
// the style of graph/functional.h: each runs its ops:: forward through
// graph::Apply (graph/apply.h), which records a backward built from the ops::
// backward kernels when ShouldRecord, and serves graph capture.
// Semantics, shapes and errors: ops/conv/conv.h, ops/pool/pool.h,
// ops/norm/batch_norm.h. Conv2d lives in graph/functional_conv.cc; pooling
// and BatchNorm2d in graph/functional_pool_norm.cc.
#pragma once

#include "tessera/ops/conv/conv.h"
#include "tessera/ops/norm/batch_norm.h"
#include "tessera/ops/pool/pool.h"
#include "tessera/tensor/tensor.h"

namespace tessera::graph {

// bias may be undefined (no bias).
Tensor Conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::Conv2dOptions& options);

Tensor MaxPool2d(const Tensor& x, const ops::Pool2dOptions& options);
Tensor AvgPool2d(const Tensor& x, const ops::Pool2dOptions& options);
Tensor GlobalAvgPool2d(const Tensor& x, ops::ImageLayout layout);  // -> [N, C]

// running_mean / running_var are updated in place in training mode (they
// are buffers, never differentiated).
Tensor BatchNorm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor running_mean, Tensor running_var,
                   const ops::BatchNormOptions& options);

}  // namespace tessera::graph

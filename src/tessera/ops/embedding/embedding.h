// Embedding lookup: out[..., :] = weight[ids[...], :] for weight [V, D] and
// int64 (or int32) ids of any shape. Ids outside [0, V) throw OpError naming
// the id and its position. Backward scatter-adds rows into a [V, D] gradient
// (fp32 accumulation, deterministic regardless of thread count: each
// vocabulary row sums its positions in order, the same order as the
// reference, so results are bitwise equal to it). Output in weight_dtype;
// grad_out may be any floating dtype. Thread-safe.
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Embedding(const Tensor& weight, const Tensor& ids);
Tensor EmbeddingBackward(const Tensor& grad_out, const Tensor& ids, const Shape& weight_shape, DType weight_dtype);

}  // namespace tessera::ops

// Cross-entropy of logits [N, V] against int64 targets [N], with an ignore
// index (targets equal to it contribute nothing and are not counted) and
// label smoothing ε (target distribution (1-ε)·onehot + ε/V). The loss is the
// mean over counted rows (0 if none). Computed in fp32 from any floating
// logits; the forward keeps the per-row log-sum-exp for the backward.
// Targets outside [0, V) other than the ignore index throw OpError.
// Optimized path: one streaming pass per row with a running (max, sum),
// AVX-512/AVX2 exp, rows over threads; row losses are summed in row order,
// so the loss does not depend on the thread count. Thread-safe.
#pragma once

#include <cstdint>

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  float label_smoothing = 0.0f;
};

struct CrossEntropyResult {
  Tensor loss;   // scalar fp32
  Tensor lse;    // [N] fp32 log-sum-exp per row
  int64_t count = 0;  // rows counted
};

CrossEntropyResult CrossEntropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& options = {});
// grad_loss: scalar (fp32) gradient of the loss. Returns grad of logits in
// the logits' dtype.
Tensor CrossEntropyBackward(const Tensor& grad_loss, const Tensor& logits, const Tensor& targets,
                            const CrossEntropyResult& fwd, const CrossEntropyOptions& options = {});

}  // namespace tessera::ops

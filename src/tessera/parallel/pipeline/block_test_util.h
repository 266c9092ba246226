// Test support (header only): a stack of GPT blocks (models::Block, dense,
// with dropout) on a fixed input, for the recompute and pipeline tests.
// Not used by the library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/graph/functional.h"
#include "tessera/models/gpt.h"
#include "tessera/tensor/rng.h"

namespace tessera::parallel::testing {

inline models::GptConfig BlockConfig(int layers, int64_t d_model, int64_t seq_len) {
  models::GptConfig c;
  c.vocab_size = 64;
  c.seq_len = seq_len;
  c.n_layers = layers;
  c.d_model = d_model;
  c.n_heads = 4;
  c.dropout = 0.1f;  // the recompute must replay the same masks
  c.seed = 77;
  return c;
}

inline Tensor BlockInput(const models::GptConfig& c, int64_t batch, int mb) {
  Tensor x = Tensor::Empty({batch, c.seq_len, c.d_model});
  FillNormal(x, 1000 + static_cast<uint64_t>(mb), 0.0f, 1.0f);
  return x;
}

// Blocks [first, end) of `gpt` on x, training mode, dropout streams per
// (micro-batch, layer).
inline Tensor RunBlocks(models::Gpt& gpt, const Tensor& x, int first, int end, int mb) {
  Tensor h = x;
  for (int i = first; i < end; ++i) h = gpt.block(i).Forward(h, true, 31 * static_cast<uint64_t>(mb) + i, nullptr);
  return h;
}

// A scalar that weights every element differently: sum(h * w) / numel.
inline Tensor BlockLoss(const Tensor& h, int microbatches) {
  Tensor w = Tensor::Empty(h.shape());
  FillUniform(w, 4242, -1.0f, 1.0f);
  return graph::Scale(graph::Sum(graph::Mul(h, w)), 1.0f / static_cast<float>(h.numel() * microbatches));
}

}  // namespace tessera::parallel::testing

// Differentiable neural-network layers: embedding, norms, activations,
// dropout, attention, rope, top-k, gather/scatter.
#include "tessera/graph/functional.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/activation/activation.h"
#include "tessera/ops/dropout/dropout.h"
#include "tessera/ops/embedding/embedding.h"
#include "tessera/ops/gather/gather.h"
#include "tessera/ops/norm/norm.h"
#include "tessera/ops/rope/rope.h"
#include "tessera/ops/topk/topk.h"

namespace tessera::graph {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor Embedding(const Tensor& weight, const Tensor& ids) {
  Tensor out = ops::Embedding(weight, ids);
  if (ShouldRecord({weight})) {
    Shape shape = weight.shape();
    DType dtype = weight.dtype();
    Record("Embedding", {weight}, {out}, [ids, shape, dtype](const Grads& g, const Needs&) {
      return Grads{ops::EmbeddingBackward(g[0], ids, shape, dtype)};
    });
  }
  return out;
}

Tensor LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  ops::NormResult r = ops::LayerNorm(x, gamma, beta, eps);
  Tensor y = r.y;
  if (ShouldRecord({x, gamma, beta})) {
    Record("LayerNorm", {x, gamma, beta}, {y}, [x, gamma, r](const Grads& g, const Needs&) {
      ops::NormGrads gr = ops::LayerNormBackward(g[0], x, gamma, r);
      return Grads{gr.grad_x, gr.grad_gamma, gr.grad_beta};
    });
  }
  return y;
}

Tensor RmsNorm(const Tensor& x, const Tensor& gamma, float eps) {
  ops::NormResult r = ops::RmsNorm(x, gamma, eps);
  Tensor y = r.y;
  if (ShouldRecord({x, gamma})) {
    Record("RmsNorm", {x, gamma}, {y}, [x, gamma, r](const Grads& g, const Needs&) {
      ops::NormGrads gr = ops::RmsNormBackward(g[0], x, gamma, r);
      return Grads{gr.grad_x, gr.grad_gamma};
    });
  }
  return y;
}

namespace {

template <typename Forward, typename BackwardKernel>
Tensor UnaryActivation(const char* name, const Tensor& x, Forward forward, BackwardKernel backward) {
  Tensor out = forward(x);
  if (ShouldRecord({x})) {
    Record(name, {x}, {out}, [x, backward](const Grads& g, const Needs&) { return Grads{backward(g[0], x)}; });
  }
  return out;
}

}  // namespace

Tensor Gelu(const Tensor& x) {
  return UnaryActivation(
      "Gelu", x, [](const Tensor& t) { return ops::Gelu(t); },
      [](const Tensor& g, const Tensor& t) { return ops::GeluBackward(g, t); });
}

Tensor Silu(const Tensor& x) {
  return UnaryActivation(
      "Silu", x, [](const Tensor& t) { return ops::Silu(t); },
      [](const Tensor& g, const Tensor& t) { return ops::SiluBackward(g, t); });
}

Tensor Relu(const Tensor& x) {
  return UnaryActivation(
      "Relu", x, [](const Tensor& t) { return ops::Relu(t); },
      [](const Tensor& g, const Tensor& t) { return ops::ReluBackward(g, t); });
}

Tensor SwiGlu(const Tensor& gate, const Tensor& up) {
  Tensor out = ops::SwiGlu(gate, up);
  if (ShouldRecord({gate, up})) {
    Record("SwiGlu", {gate, up}, {out}, [gate, up](const Grads& g, const Needs&) {
      ops::SwiGluGrads r = ops::SwiGluBackward(g[0], gate, up);
      return Grads{r.grad_gate, r.grad_up};
    });
  }
  return out;
}

Tensor Dropout(const Tensor& x, float p, bool training, uint64_t seed, uint64_t offset) {
  if (!training || p == 0.0f) return x;
  Tensor out = ops::Dropout(x, p, seed, offset);
  if (ShouldRecord({x})) {
    Record("Dropout", {x}, {out}, [p, seed, offset](const Grads& g, const Needs&) {
      return Grads{ops::DropoutBackward(g[0], p, seed, offset)};
    });
  }
  return out;
}

Tensor CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  ops::AttentionResult r = ops::CausalAttention(q, k, v, scale);
  if (ShouldRecord({q, k, v})) {
    Record("CausalAttention", {q, k, v}, {r.out}, [q, k, v, r, scale](const Grads& g, const Needs&) {
      ops::AttentionGrads gr = ops::CausalAttentionBackward(g[0], q, k, v, r, scale);
      return Grads{gr.grad_q, gr.grad_k, gr.grad_v};
    });
  }
  return r.out;
}

Tensor Rope(const Tensor& x, float base, int64_t position_offset) {
  Tensor out = ops::Rope(x, base, position_offset);
  if (ShouldRecord({x})) {
    Record("Rope", {x}, {out}, [base, position_offset](const Grads& g, const Needs&) {
      return Grads{ops::RopeBackward(g[0], base, position_offset)};
    });
  }
  return out;
}

TopKOutput TopK(const Tensor& x, int64_t k) {
  ops::TopKResult r = ops::TopK(x, k);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Tensor indices = r.indices;
    Record("TopK", {x}, {r.values}, [indices, shape](const Grads& g, const Needs&) {
      return Grads{ops::TopKBackward(g[0], indices, shape)};
    });
  }
  return {r.values, r.indices};
}

Tensor Gather(const Tensor& x, int axis, const Tensor& index) {
  Tensor out = ops::Gather(x, axis, index);
  if (ShouldRecord({x})) {
    Shape shape = x.shape();
    Record("Gather", {x}, {out}, [axis, index, shape](const Grads& g, const Needs&) {
      return Grads{ops::GatherBackward(g[0], axis, index, shape)};
    });
  }
  return out;
}

Tensor ScatterAdd(const Tensor& base, int axis, const Tensor& index, const Tensor& src) {
  Tensor out = ops::ScatterAdd(base, axis, index, src);
  if (ShouldRecord({base, src})) {
    Record("ScatterAdd", {base, src}, {out}, [axis, index](const Grads& g, const Needs& needs) {
      Tensor grad_src = needs[1] ? ops::ScatterAddBackwardSrc(g[0], axis, index) : Tensor();
      return Grads{g[0], grad_src};
    });
  }
  return out;
}

Tensor GatherRows(const Tensor& x, const Tensor& rows) {
  Tensor out = ops::GatherRows(x, rows);
  if (ShouldRecord({x})) {
    int64_t n = x.size(0);
    Record("GatherRows", {x}, {out}, [rows, n](const Grads& g, const Needs&) {
      return Grads{ops::ScatterAddRows(g[0], rows, n)};
    });
  }
  return out;
}

Tensor ScatterAddRows(const Tensor& src, const Tensor& rows, int64_t n) {
  Tensor out = ops::ScatterAddRows(src, rows, n);
  if (ShouldRecord({src})) {
    Record("ScatterAddRows", {src}, {out},
           [rows](const Grads& g, const Needs&) { return Grads{ops::GatherRows(g[0], rows)}; });
  }
  return out;
}

}  // namespace tessera::graph

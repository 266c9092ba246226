// Differentiable neural-network layers: embedding, norms, activations,
// dropout, attention, rope, top-k, gather/scatter.
#include "tessera/graph/functional.h"

#include <fmt/format.h>

#include "tessera/graph/apply.h"
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

using Ins = std::vector<Tensor>;

Tensor Embedding(const Tensor& weight, const Tensor& ids) {
  Shape shape = weight.shape();
  DType dtype = weight.dtype();
  return Apply1(
      {"Embedding", OpKind::kOpaque, "", SaveBit(1)}, {weight, ids},
      [](const Ins& in) { return Ins{ops::Embedding(in[0], in[1])}; },
      [shape, dtype](const Grads& g, const Ins& in, const Ins&, const Needs&) {
        return Grads{ops::EmbeddingBackward(g[0], in[1], shape, dtype), Tensor()};
      });
}

namespace {

// Norm outputs: y, then the saved statistics (mean: layernorm only, rstd).
Ins NormOutputs(const ops::NormResult& r) { return Ins{r.y, r.mean, r.rstd}; }
ops::NormResult NormFromOutputs(const Ins& out) {
  ops::NormResult r;
  r.y = out[0];
  r.mean = out[1];
  r.rstd = out[2];
  return r;
}

}  // namespace

Tensor LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  return Apply1(
      {"LayerNorm", OpKind::kReduction, fmt::format("eps={}", eps), SaveBit(0) | SaveBit(1), SaveBit(1) | SaveBit(2),
       1},
      {x, gamma, beta}, [eps](const Ins& in) { return NormOutputs(ops::LayerNorm(in[0], in[1], in[2], eps)); },
      [](const Grads& g, const Ins& in, const Ins& out, const Needs&) {
        ops::NormGrads gr = ops::LayerNormBackward(g[0], in[0], in[1], NormFromOutputs(out));
        return Grads{gr.grad_x, gr.grad_gamma, gr.grad_beta};
      });
}

Tensor RmsNorm(const Tensor& x, const Tensor& gamma, float eps) {
  return Apply1(
      {"RmsNorm", OpKind::kReduction, fmt::format("eps={}", eps), SaveBit(0) | SaveBit(1), SaveBit(1) | SaveBit(2), 1},
      {x, gamma}, [eps](const Ins& in) { return NormOutputs(ops::RmsNorm(in[0], in[1], eps)); },
      [](const Grads& g, const Ins& in, const Ins& out, const Needs&) {
        ops::NormGrads gr = ops::RmsNormBackward(g[0], in[0], in[1], NormFromOutputs(out));
        return Grads{gr.grad_x, gr.grad_gamma};
      });
}

namespace {

template <typename Forward, typename BackwardKernel>
Tensor UnaryActivation(const char* name, const Tensor& x, Forward forward, BackwardKernel backward) {
  return Apply1(
      {name, OpKind::kElementwise, ""}, {x}, [forward](const Ins& in) { return Ins{forward(in[0])}; },
      [backward](const Grads& g, const Ins& in, const Ins&, const Needs&) { return Grads{backward(g[0], in[0])}; });
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

Tensor Pointwise(ops::PointwiseFn fn, const Tensor& x, float alpha, float beta) {
  return Apply1(
      {ops::PointwiseFnName(fn).data(), OpKind::kElementwise, fmt::format("alpha={} beta={}", alpha, beta), kSaveAll,
       SaveBit(0)},
      {x}, [fn, alpha, beta](const Ins& in) { return Ins{ops::Pointwise(fn, in[0], alpha, beta)}; },
      [fn, alpha, beta](const Grads& g, const Ins& in, const Ins& out, const Needs&) {
        return Grads{ops::PointwiseBackward(fn, g[0], in[0], out[0], alpha, beta)};
      });
}

Tensor SwiGlu(const Tensor& gate, const Tensor& up) {
  return Apply1(
      {"SwiGlu", OpKind::kElementwise, ""}, {gate, up}, [](const Ins& in) { return Ins{ops::SwiGlu(in[0], in[1])}; },
      [](const Grads& g, const Ins& in, const Ins&, const Needs&) {
        ops::SwiGluGrads r = ops::SwiGluBackward(g[0], in[0], in[1]);
        return Grads{r.grad_gate, r.grad_up};
      });
}

Tensor Dropout(const Tensor& x, float p, bool training, uint64_t seed, uint64_t offset) {
  if (!training || p == 0.0f) return x;
  return Apply1(
      {"Dropout", OpKind::kElementwise, fmt::format("p={} seed={} offset={}", p, seed, offset), kSaveNone}, {x},
      [p, seed, offset](const Ins& in) { return Ins{ops::Dropout(in[0], p, seed, offset)}; },
      [p, seed, offset](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::DropoutBackward(g[0], p, seed, offset)};
      });
}

Tensor CausalAttention(const Tensor& q, const Tensor& k, const Tensor& v, float scale) {
  // Outputs: out, then the saved row log-sum-exp.
  return Apply1(
      {"CausalAttention", OpKind::kOpaque, fmt::format("scale={}", scale), kSaveAll, SaveBit(0) | SaveBit(1), 1},
      {q, k, v},
      [scale](const Ins& in) {
        ops::AttentionResult r = ops::CausalAttention(in[0], in[1], in[2], scale);
        return Ins{r.out, r.lse};
      },
      [scale](const Grads& g, const Ins& in, const Ins& out, const Needs&) {
        ops::AttentionResult r{out[0], out[1]};
        ops::AttentionGrads gr = ops::CausalAttentionBackward(g[0], in[0], in[1], in[2], r, scale);
        return Grads{gr.grad_q, gr.grad_k, gr.grad_v};
      });
}

Tensor Rope(const Tensor& x, float base, int64_t position_offset) {
  return Apply1(
      {"Rope", OpKind::kElementwise, fmt::format("base={} offset={}", base, position_offset), kSaveNone}, {x},
      [base, position_offset](const Ins& in) { return Ins{ops::Rope(in[0], base, position_offset)}; },
      [base, position_offset](const Grads& g, const Ins&, const Ins&, const Needs&) {
        return Grads{ops::RopeBackward(g[0], base, position_offset)};
      });
}

TopKOutput TopK(const Tensor& x, int64_t k) {
  Shape shape = x.shape();
  std::vector<Tensor> out = Apply(
      {"TopK", OpKind::kOpaque, fmt::format("k={}", k), kSaveNone, SaveBit(1), 1}, {x},
      [k](const Ins& in) {
        ops::TopKResult r = ops::TopK(in[0], k);
        return Ins{r.values, r.indices};
      },
      [shape](const Grads& g, const Ins&, const Ins& out, const Needs&) {
        return Grads{ops::TopKBackward(g[0], out[1], shape)};
      });
  return {out[0], out[1]};
}

Tensor Gather(const Tensor& x, int axis, const Tensor& index) {
  Shape shape = x.shape();
  return Apply1(
      {"Gather", OpKind::kInjective, fmt::format("axis={}", axis), SaveBit(1)}, {x, index},
      [axis](const Ins& in) { return Ins{ops::Gather(in[0], axis, in[1])}; },
      [axis, shape](const Grads& g, const Ins& in, const Ins&, const Needs&) {
        return Grads{ops::GatherBackward(g[0], axis, in[1], shape), Tensor()};
      });
}

Tensor ScatterAdd(const Tensor& base, int axis, const Tensor& index, const Tensor& src) {
  return Apply1(
      {"ScatterAdd", OpKind::kOpaque, fmt::format("axis={}", axis), SaveBit(1)}, {base, index, src},
      [axis](const Ins& in) { return Ins{ops::ScatterAdd(in[0], axis, in[1], in[2])}; },
      [axis](const Grads& g, const Ins& in, const Ins&, const Needs& needs) {
        Tensor grad_src = needs[2] ? ops::ScatterAddBackwardSrc(g[0], axis, in[1]) : Tensor();
        return Grads{g[0], Tensor(), grad_src};
      });
}

Tensor GatherRows(const Tensor& x, const Tensor& rows) {
  int64_t n = x.size(0);
  return Apply1(
      {"GatherRows", OpKind::kInjective, "", SaveBit(1)}, {x, rows},
      [](const Ins& in) { return Ins{ops::GatherRows(in[0], in[1])}; },
      [n](const Grads& g, const Ins& in, const Ins&, const Needs&) {
        return Grads{ops::ScatterAddRows(g[0], in[1], n), Tensor()};
      });
}

Tensor ScatterAddRows(const Tensor& src, const Tensor& rows, int64_t n) {
  return Apply1(
      {"ScatterAddRows", OpKind::kOpaque, fmt::format("n={}", n), SaveBit(1)}, {src, rows},
      [n](const Ins& in) { return Ins{ops::ScatterAddRows(in[0], in[1], n)}; },
      [](const Grads& g, const Ins& in, const Ins&, const Needs&) {
        return Grads{ops::GatherRows(g[0], in[1]), Tensor()};
      });
}

}  // namespace tessera::graph

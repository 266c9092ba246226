// Feed-forward layers of the GPT blocks: the dense MLP and the
// Mixture-of-Experts layer.
//
// Mlp: gelu:   y = W_down · gelu(W_up · x)
//      swiglu: y = W_down · (silu(W_gate · x) ⊙ W_up · x)
//
// MoeFfn (token-choice top-k routing, GShard / Switch / Mixtral):
//   1. router logits = x · W_routerᵀ (fp32), p = softmax(logits) over experts;
//   2. each token picks its top_k experts; the gate weights are the chosen
//      probabilities, renormalized to sum to 1 when normalize_top_k;
//   3. dispatch: for each expert, GatherRows of its tokens, run the expert
//      MLP, scale by the gates; combine: one ScatterAddRows of all expert
//      outputs back to token order (deterministic);
//   4. capacity (optional): an expert keeps at most
//      C = ceil(capacity_factor · N · top_k / E) assignments, ordered by
//      choice rank (all first choices, then second choices, ...) then token
//      index; dropped assignments contribute nothing (the block's residual
//      carries the token);
//   5. Switch load-balancing loss: aux = E · Σ_e f_e · P_e, with f_e the
//      fraction of the N · top_k assignments routed to e (before capacity
//      dropping; not differentiable) and P_e the mean router probability of
//      e. It equals 1 for perfectly uniform routing, E when everything goes
//      to one expert with probability 1.
// No router jitter / noise. The layer knows nothing of parallelism (expert
// parallelism is applied from outside).
// Thread-safety: Forward mutates last_routing(); one thread per instance.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/graph/layers.h"
#include "tessera/models/gpt_config.h"

namespace tessera::models {

class Mlp : public graph::Module {
 public:
  Mlp(int64_t d_model, int64_t d_ff, ActivationKind activation, bool bias, float init_std, float resid_std,
      DType dtype);
  Tensor Forward(const Tensor& x) const;  // [..., d_model]

 private:
  ActivationKind activation_;
  std::unique_ptr<graph::nn::Linear> w_gate_;  // swiglu only
  std::unique_ptr<graph::nn::Linear> w_up_;
  std::unique_ptr<graph::nn::Linear> w_down_;
};

// Routing decisions of the last MoeFfn::Forward (diagnostics and tests).
struct MoeRouting {
  int64_t tokens = 0;
  int top_k = 0;
  int num_experts = 0;
  std::vector<int64_t> expert_indices;     // [tokens * top_k], choice j of token n at n * top_k + j
  std::vector<float> gates;                // [tokens * top_k]
  std::vector<int64_t> tokens_per_expert;  // kept assignments per expert
  int64_t capacity = -1;                   // -1 = unlimited
  int64_t dropped = 0;                     // assignments dropped by capacity
  double aux_loss = 0.0;
};

struct MoeOutput {
  Tensor y;         // like x
  Tensor aux_loss;  // scalar fp32, differentiable w.r.t. the router
};

// Switch load-balancing loss of router probabilities `probs` [N, E] (fp32)
// given the chosen experts `expert_indices` [N, k] (int64).
Tensor LoadBalancingLoss(const Tensor& probs, const Tensor& expert_indices, int num_experts);

// Steps 1, 2, 4 and 5 above for tokens xf [N, d]: the routing decision that
// MoeFfn and the expert-parallel layer (parallel/) share.
struct MoeRoute {
  Tensor gates;     // [N, k], differentiable w.r.t. the router
  Tensor aux_loss;  // scalar fp32, differentiable w.r.t. the router
  std::vector<int64_t> expert_indices;  // [N·k]: choice j of token n at n·k + j
  int64_t capacity = -1;                // -1 = unlimited
  // Per expert, the kept assignments in dispatch order (all first choices,
  // then second choices, ...): token rows and their slots n·k + j in gates.
  std::vector<std::vector<int64_t>> rows, slots;
  int64_t dropped = 0;
};
MoeRoute RouteTokens(const graph::nn::Linear& router, const Tensor& xf, int num_experts, int top_k,
                     bool normalize_top_k, double capacity_factor);
// Fills `r` from a route (gates read back to the host).
void RecordRouting(const MoeRoute& route, int64_t tokens, int top_k, int num_experts, MoeRouting* r);

class MoeFfn : public graph::Module {
 public:
  explicit MoeFfn(const GptConfig& config);
  MoeOutput Forward(const Tensor& x);  // x [B, T, d_model] (or [N, d_model])

  const graph::nn::Linear& router() const { return *router_; }
  const graph::nn::ModuleList<Mlp>& experts() const { return *experts_; }
  const MoeRouting& last_routing() const { return last_routing_; }
  int64_t ParametersPerExpert() const;

 private:
  int num_experts_;
  int top_k_;
  double capacity_factor_;
  bool normalize_top_k_;
  std::unique_ptr<graph::nn::Linear> router_;
  std::unique_ptr<graph::nn::ModuleList<Mlp>> experts_;
  MoeRouting last_routing_;
};

}  // namespace tessera::models

// AdamW (Loshchilov & Hutter): Adam with decoupled weight decay and bias
// correction, the same arithmetic as torch.optim.AdamW:
//   p ← p · (1 − lr·wd)
//   m ← β1·m + (1−β1)·g          v ← β2·v + (1−β2)·g²
//   p ← p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + ε)
// State (m, v) is fp32 whatever the parameter dtype; fp32 parameters are
// updated in place by a fused, vectorized, multi-threaded loop (one pass
// over p, g, m, v). bf16/fp16 parameters (or gradients) are converted to fp32
// for the update and rounded back (keeping fp32 masters is recommended).
// Every parameter has its own step count t: a parameter without a gradient
// in a step (e.g. an MoE expert that received no token) is skipped and its
// t does not advance, as in PyTorch.
// Parameter groups carry their own weight decay and learning-rate scale;
// DefaultParamGroups applies the usual rule (no decay for tensors with fewer
// than 2 axes: norm gains and biases).
// Thread-safety: one thread drives an optimizer; Step parallelizes inside.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/graph/module.h"

namespace tessera::optim {

struct AdamWOptions {
  double lr = 1e-3;  // used by Step() without an argument
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // used by the single-list constructor
};

struct ParamGroup {
  std::vector<graph::NamedTensor> params;
  double weight_decay = 0.0;
  double lr_scale = 1.0;  // the group's lr = lr_scale · Step's lr
};

// Two groups: tensors with dim >= 2 (matrices, embeddings) get
// `weight_decay`; the others (norm gains, biases) get none. Empty groups are
// omitted.
std::vector<ParamGroup> DefaultParamGroups(const std::vector<graph::NamedTensor>& params, double weight_decay);

class AdamW {
 public:
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options);
  // DefaultParamGroups(params, options.weight_decay).
  AdamW(const std::vector<graph::NamedTensor>& params, const AdamWOptions& options);

  // One update of every parameter that has a gradient, at learning rate lr
  // (typically the schedule's value for this step).
  void Step(double lr);
  void Step() { Step(options_.lr); }
  // Number of Step calls so far.
  int64_t steps() const { return steps_; }
  const AdamWOptions& options() const { return options_; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

  // Optimizer state for checkpoints: "<param>.exp_avg", "<param>.exp_avg_sq"
  // (fp32, the parameter's shape), "<param>.step" (int64 scalar), and
  // "optimizer.steps" (int64 scalar). The tensors alias the live state.
  std::map<std::string, Tensor> StateDict() const;
  // Restores a StateDict; every key must be present with the right shape
  // and dtype and no other key may appear, else nothing changes and the
  // error names the keys.
  Status LoadStateDict(const std::map<std::string, Tensor>& state);

 private:
  struct State {
    std::string name;
    Tensor param;
    Tensor exp_avg;     // fp32
    Tensor exp_avg_sq;  // fp32
    int64_t step = 0;
    double weight_decay = 0.0;
    double lr_scale = 1.0;
  };
  std::vector<ParamGroup> groups_;
  AdamWOptions options_;
  std::vector<State> states_;
  int64_t steps_ = 0;
};

// The fused kernel on raw fp32 buffers (exposed for tests and benchmarks).
// bias_correction1/2 are 1−β1^t and 1−β2^t.
void AdamWUpdateF32(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, float bias_correction1,
                    float bias_correction2);

}  // namespace tessera::optim

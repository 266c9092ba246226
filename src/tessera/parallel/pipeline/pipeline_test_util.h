// Test support for the pipeline tests (header only): a toy model — a stack
// of graph::nn::Linear + Gelu layers with deterministic parameters split
// into contiguous virtual stages — its per-micro-batch data and loss, and
// thread-rank helpers. Not used by the library.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/layers.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/pipeline/executor.h"

namespace tessera::parallel::testing {

inline constexpr int64_t kBatch = 8;  // 1 KiB activations: larger than the test channels
inline constexpr int64_t kDim = 32;

class ToyStack : public graph::Module {
 public:
  explicit ToyStack(int layers) {
    for (int i = 0; i < layers; ++i) layers_.Append(std::make_unique<graph::nn::Linear>(kDim, kDim, true, 0.3f));
    RegisterModule("layers", &layers_);
    InitParameters(1234);
  }
  int size() const { return static_cast<int>(layers_.size()); }
  Tensor Run(const Tensor& x, int first, int end) const {
    Tensor h = x;
    for (int i = first; i < end; ++i) h = graph::Gelu(layers_[i].Forward(h));
    return h;
  }

 private:
  graph::nn::ModuleList<graph::nn::Linear> layers_;
};

inline Tensor Pattern(int mb, int salt) {
  std::vector<float> v(kBatch * kDim);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + 1.3f * mb + 0.71f * salt);
  return Tensor::FromVector(v, {kBatch, kDim});
}
inline Tensor Input(int mb) { return Pattern(mb, 0); }
inline Tensor Target(int mb) { return Pattern(mb, 1); }

// Mean squared error against the micro-batch's target, divided by m.
inline Tensor Loss(const Tensor& y, int mb, int microbatches) {
  Tensor d = graph::Sub(y, Target(mb));
  return graph::Scale(graph::Mean(graph::Mul(d, d)), 1.0f / static_cast<float>(microbatches));
}

struct Reference {
  double loss = 0;
  std::map<std::string, std::vector<float>> grads;
};

// The whole stack on this thread, micro-batch after micro-batch.
inline Reference SingleThreadReference(int layers, int microbatches) {
  ToyStack model(layers);
  Reference ref;
  for (int mb = 0; mb < microbatches; ++mb) {
    Tensor loss = Loss(model.Run(Input(mb), 0, layers), mb, microbatches);
    ref.loss += loss.Item();
    graph::Backward(loss);
  }
  for (auto& [name, p] : model.NamedParameters()) ref.grads[name] = p.grad().ToFloatVector();
  return ref;
}

// The stage of `model` for this rank: virtual stage k runs layers
// [k*L/V, (k+1)*L/V) of the L layers, V = stages * virtual_stages.
inline PipelineStage ToyStage(const ToyStack& model, int stage, int stages, int virtual_stages, int microbatches) {
  const int total = stages * virtual_stages;
  const int per = model.size() / total;
  PipelineStage s;
  s.forward = [&model, stage, stages, total, per, microbatches](int chunk, int mb, const Tensor& input) {
    const int vs = VirtualStage(stage, chunk, stages);
    Tensor h = model.Run(vs == 0 ? Input(mb) : input, vs * per, (vs + 1) * per);
    return vs == total - 1 ? Loss(h, mb, microbatches) : h;
  };
  s.input_spec = [](int, int) { return std::make_pair(Shape{kBatch, kDim}, DType::kF32); };
  return s;
}

// Which layers (by index) virtual stages of `stage` own.
inline bool OwnsLayer(int layer, int layers, int stage, int stages, int virtual_stages) {
  const int per = layers / (stages * virtual_stages);
  return (layer / per) % stages == stage;
}

inline int LayerOf(const std::string& param_name) { return std::stoi(param_name.substr(param_name.find('.') + 1)); }

// Small channels and low-latency slots, so activations take the
// rendezvous path (a send waits for its receive).
inline comm::CommOptions PipelineTestOptions(const std::string& name) {
  comm::CommOptions o = comm::testing::TestOptions("", name);
  o.shm_p2p_bytes = 1 << 10;
  o.shm_ll_bytes = 64;
  return o;
}

inline bool CloseRel(double got, double want, double scale) {
  return std::fabs(got - want) <= 1e-6 * std::max(std::fabs(want), 1e-3 * scale);
}

// Every element of `grad` within 1e-6 relative of `want` (elements far
// below the tensor's largest magnitude are compared against 1e-3 of it).
inline void ExpectGradientClose(const std::string& what, const Tensor& grad, const std::vector<float>& want) {
  ASSERT_TRUE(grad.defined()) << what;
  const std::vector<float> got = grad.ToFloatVector();
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!CloseRel(got[i], want[i], scale) && bad++ < 3) {
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
    }
  }
}

}  // namespace tessera::parallel::testing

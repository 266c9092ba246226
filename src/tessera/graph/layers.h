// Standard layers (namespace graph::nn, apart from the same-named functions
// of functional.h) built on Module and the differentiable functions.
//
// Linear stores its weight as [out_features, in_features] (the PyTorch /
// safetensors convention, so tied embeddings and checkpoints line up) and
// computes y = x · Wᵀ + b with a transposed-B GEMM; x is [..., in].
// Parameters may be kept in fp32 (master weights) while activations are
// bf16/fp16: Linear and Embedding cast their weights to the activation dtype
// with a differentiable Cast, so gradients land in fp32. Norm layers pass
// fp32 gamma/beta straight to the kernels (which accept mixed dtypes).
// Parameters are left uninitialized until the root module's
// InitParameters(seed) runs (call it for a standalone layer too).
// Thread-safety: as Module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/graph/module.h"

namespace tessera::graph::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, float init_std, DType dtype = DType::kF32);
  Tensor Forward(const Tensor& x) const;
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

 private:
  int64_t in_features_;
  int64_t out_features_;
  Tensor weight_;
  Tensor bias_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, float init_std, DType dtype = DType::kF32);
  // ids: int64 of any shape -> [..., dim] in the weight's dtype.
  Tensor Forward(const Tensor& ids) const;
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f, DType dtype = DType::kF32);
  Tensor Forward(const Tensor& x) const;
  const Tensor& gamma() const { return gamma_; }
  const Tensor& beta() const { return beta_; }

 private:
  float eps_;
  Tensor gamma_;
  Tensor beta_;
};

class RmsNorm : public Module {
 public:
  explicit RmsNorm(int64_t dim, float eps = 1e-6f, DType dtype = DType::kF32);
  Tensor Forward(const Tensor& x) const;
  const Tensor& gamma() const { return gamma_; }

 private:
  float eps_;
  Tensor gamma_;
};

// An owned, indexed list of modules; child i is named "<i>".
template <typename T>
class ModuleList : public Module {
 public:
  T& Append(std::unique_ptr<T> module) {
    T& ref = *module;
    RegisterModule(std::to_string(items_.size()), &ref);
    items_.push_back(std::move(module));
    return ref;
  }
  T& operator[](size_t i) const { return *items_.at(i); }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::unique_ptr<T>> items_;
};

}  // namespace tessera::graph::nn

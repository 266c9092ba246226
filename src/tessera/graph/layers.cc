#include "tessera/graph/layers.h"

#include "tessera/graph/functional.h"
#include "tessera/base/error.h"

namespace tessera::graph::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias, float init_std, DType dtype)
    : in_features_(in_features), out_features_(out_features) {
  TESSERA_CHECK(in_features > 0 && out_features > 0, "Linear({}, {})", in_features, out_features);
  weight_ = RegisterParameter("weight", Tensor::Empty({out_features, in_features}, dtype), graph::ParamInit::Normal(init_std));
  if (bias) bias_ = RegisterParameter("bias", Tensor::Empty({out_features}, dtype), graph::ParamInit::Zeros());
}

Tensor Linear::Forward(const Tensor& x) const {
  TESSERA_OP_CHECK(x.dim() >= 1 && x.size(-1) == in_features_, "Linear: input shape {} does not end in {}",
                   ShapeString(x.shape()), in_features_);
  return graph::Linear(x, graph::Cast(weight_, x.dtype()),
                       bias_.defined() ? graph::Cast(bias_, x.dtype()) : Tensor());
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, float init_std, DType dtype) {
  TESSERA_CHECK(num_embeddings > 0 && dim > 0, "Embedding({}, {})", num_embeddings, dim);
  weight_ = RegisterParameter("weight", Tensor::Empty({num_embeddings, dim}, dtype), graph::ParamInit::Normal(init_std));
}

Tensor Embedding::Forward(const Tensor& ids) const { return graph::Embedding(weight_, ids); }

LayerNorm::LayerNorm(int64_t dim, float eps, DType dtype) : eps_(eps) {
  gamma_ = RegisterParameter("weight", Tensor::Empty({dim}, dtype), graph::ParamInit::Ones());
  beta_ = RegisterParameter("bias", Tensor::Empty({dim}, dtype), graph::ParamInit::Zeros());
}

Tensor LayerNorm::Forward(const Tensor& x) const { return graph::LayerNorm(x, gamma_, beta_, eps_); }

RmsNorm::RmsNorm(int64_t dim, float eps, DType dtype) : eps_(eps) {
  gamma_ = RegisterParameter("weight", Tensor::Empty({dim}, dtype), graph::ParamInit::Ones());
}

Tensor RmsNorm::Forward(const Tensor& x) const { return graph::RmsNorm(x, gamma_, eps_); }

}  // namespace tessera::graph::nn

#include "tessera/optim/adamw.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "tessera/base/check.h"

namespace tessera::optim {
namespace {
// Tensors from 16 Ki elements (a 128 x 128 weight) update on all kernel
// threads: a parallel region costs a few us, the update ~2 ns per element.
constexpr int64_t kParallelThreshold = 1 << 14;

Tensor ScalarInt(int64_t value) { return Tensor::FromInts({value}, {}); }
}  // namespace

void AdamWUpdateF32(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                    float* __restrict exp_avg_sq, int64_t n, float lr, float beta1, float beta2, float eps,
                    float weight_decay, float bias_correction1, float bias_correction2) {
  const float decay = 1.0f - lr * weight_decay;
  const float step_size = lr / bias_correction1;
  const float inv_sqrt_bc2 = 1.0f / std::sqrt(bias_correction2);
  const float one_minus_b1 = 1.0f - beta1, one_minus_b2 = 1.0f - beta2;
#pragma omp parallel for simd schedule(static) if (n >= kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i];
    float m = beta1 * exp_avg[i] + one_minus_b1 * g;
    float v = beta2 * exp_avg_sq[i] + one_minus_b2 * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    float denom = std::sqrt(v) * inv_sqrt_bc2 + eps;
    param[i] = param[i] * decay - step_size * m / denom;
  }
}

std::vector<ParamGroup> DefaultParamGroups(const std::vector<graph::NamedTensor>& params, double weight_decay) {
  ParamGroup decay{{}, weight_decay, 1.0}, no_decay{{}, 0.0, 1.0};
  for (const auto& p : params) (p.second.dim() >= 2 ? decay : no_decay).params.push_back(p);
  std::vector<ParamGroup> groups;
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  return groups;
}

AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : groups_(std::move(groups)), options_(options) {
  TESSERA_CHECK(options_.beta1 >= 0 && options_.beta1 < 1 && options_.beta2 >= 0 && options_.beta2 < 1,
                "AdamW betas ({}, {}) must lie in [0, 1)", options_.beta1, options_.beta2);
  TESSERA_CHECK(options_.eps > 0, "AdamW eps {} must be positive", options_.eps);
  std::set<const TensorImpl*> seen;
  std::set<std::string> names;
  for (const ParamGroup& group : groups_) {
    for (const auto& [name, param] : group.params) {
      TESSERA_CHECK(param.defined() && IsFloating(param.dtype()) && param.is_contiguous(),
                    "AdamW parameter '{}' must be a defined, contiguous floating tensor", name);
      TESSERA_CHECK(seen.insert(param.impl()).second, "AdamW parameter '{}' appears twice", name);
      TESSERA_CHECK(names.insert(name).second, "AdamW parameter name '{}' appears twice", name);
      State s;
      s.name = name;
      s.param = param;
      s.exp_avg = Tensor::Zeros(param.shape(), DType::kF32);
      s.exp_avg_sq = Tensor::Zeros(param.shape(), DType::kF32);
      s.weight_decay = group.weight_decay;
      s.lr_scale = group.lr_scale;
      states_.push_back(std::move(s));
    }
  }
}

AdamW::AdamW(const std::vector<graph::NamedTensor>& params, const AdamWOptions& options)
    : AdamW(DefaultParamGroups(params, options.weight_decay), options) {}

void AdamW::Step(double lr) {
  ++steps_;
  for (State& s : states_) {
    Tensor grad = s.param.grad();
    if (!grad.defined()) continue;
    TESSERA_CHECK(grad.shape() == s.param.shape(), "gradient of '{}' has shape {}, parameter {}", s.name,
                  ShapeString(grad.shape()), ShapeString(s.param.shape()));
    ++s.step;
    const double bc1 = 1.0 - std::pow(options_.beta1, static_cast<double>(s.step));
    const double bc2 = 1.0 - std::pow(options_.beta2, static_cast<double>(s.step));
    const float group_lr = static_cast<float>(lr * s.lr_scale);
    Tensor g32 = grad.To(DType::kF32).Contiguous();
    const bool in_place = s.param.dtype() == DType::kF32;
    Tensor p32 = in_place ? s.param : s.param.To(DType::kF32);
    AdamWUpdateF32(p32.data<float>(), g32.data<float>(), s.exp_avg.data<float>(), s.exp_avg_sq.data<float>(),
                   p32.numel(), group_lr, static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                   static_cast<float>(options_.eps), static_cast<float>(s.weight_decay), static_cast<float>(bc1),
                   static_cast<float>(bc2));
    if (!in_place) s.param.CopyFrom(p32);
  }
}

std::map<std::string, Tensor> AdamW::StateDict() const {
  std::map<std::string, Tensor> out;
  for (const State& s : states_) {
    out.emplace(s.name + ".exp_avg", s.exp_avg);
    out.emplace(s.name + ".exp_avg_sq", s.exp_avg_sq);
    out.emplace(s.name + ".step", ScalarInt(s.step));
  }
  out.emplace("optimizer.steps", ScalarInt(steps_));
  return out;
}

Status AdamW::LoadStateDict(const std::map<std::string, Tensor>& state) {
  std::vector<std::string> problems;
  std::set<std::string> expected;
  auto find = [&](const std::string& key, const Shape& shape, DType dtype) -> const Tensor* {
    expected.insert(key);
    auto it = state.find(key);
    if (it == state.end()) {
      problems.push_back(fmt::format("missing key '{}'", key));
      return nullptr;
    }
    const Tensor& t = it->second;
    if (!t.defined() || t.shape() != shape || t.dtype() != dtype) {
      problems.push_back(fmt::format("'{}' is {} {}, expected {} {}", key,
                                     t.defined() ? ShapeString(t.shape()) : "undefined",
                                     t.defined() ? DTypeName(t.dtype()) : "", ShapeString(shape), DTypeName(dtype)));
      return nullptr;
    }
    return &t;
  };
  struct Pending {
    State* state;
    const Tensor* m;
    const Tensor* v;
    const Tensor* step;
  };
  std::vector<Pending> pending;
  for (State& s : states_) {
    const Tensor* m = find(s.name + ".exp_avg", s.param.shape(), DType::kF32);
    const Tensor* v = find(s.name + ".exp_avg_sq", s.param.shape(), DType::kF32);
    const Tensor* step = find(s.name + ".step", {}, DType::kI64);
    if (m && v && step) pending.push_back({&s, m, v, step});
  }
  const Tensor* steps = find("optimizer.steps", {}, DType::kI64);
  for (const auto& [key, t] : state) {
    if (!expected.count(key)) problems.push_back(fmt::format("unexpected key '{}'", key));
  }
  if (!problems.empty()) {
    std::string text;
    for (size_t i = 0; i < problems.size() && i < 10; ++i) text += "\n  " + problems[i];
    if (problems.size() > 10) text += fmt::format("\n  ... and {} more", problems.size() - 10);
    return InvalidArgument("optimizer state does not match the parameters ({} problems):{}", problems.size(), text);
  }
  for (Pending& p : pending) {
    if (p.state->exp_avg.impl() != p.m->impl()) p.state->exp_avg.CopyFrom(*p.m);
    if (p.state->exp_avg_sq.impl() != p.v->impl()) p.state->exp_avg_sq.CopyFrom(*p.v);
    p.state->step = static_cast<int64_t>(p.step->Item());
  }
  steps_ = static_cast<int64_t>(steps->Item());
  return Status::Ok();
}

}  // namespace tessera::optim

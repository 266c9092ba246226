#include "tessera/graph/module.h"

#include <set>

#include <fmt/format.h>

#include "tessera/tensor/rng.h"

namespace tessera::graph {

uint64_t NameHash(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Tensor Module::RegisterParameter(std::string name, Tensor value, ParamInit init) {
  TESSERA_CHECK(value.defined(), "parameter '{}' is undefined", name);
  TESSERA_CHECK(IsFloating(value.dtype()), "parameter '{}' must be floating, got {}", name,
                DTypeName(value.dtype()));
  CheckNewName(name, "parameter");
  value.set_requires_grad(true);
  value.set_name(name);
  params_.push_back({std::move(name), value, init});
  return value;
}

Tensor Module::RegisterBuffer(std::string name, Tensor value, ParamInit init) {
  TESSERA_CHECK(value.defined(), "buffer '{}' is undefined", name);
  CheckNewName(name, "buffer");
  value.set_name(name);
  buffers_.push_back({std::move(name), value, init});
  return value;
}

void Module::CheckNewName(const std::string& name, const char* what) const {
  TESSERA_CHECK(name.find('.') == std::string::npos && !name.empty(), "bad {} name '{}'", what, name);
  for (const Param& p : params_) TESSERA_CHECK(p.name != name, "{} '{}': a parameter has that name", what, name);
  for (const Param& p : buffers_) TESSERA_CHECK(p.name != name, "{} '{}': a buffer has that name", what, name);
}

void Module::RegisterModule(std::string name, Module* child) {
  TESSERA_CHECK(child != nullptr && child != this, "bad child module '{}'", name);
  TESSERA_CHECK(name.find('.') == std::string::npos && !name.empty(), "bad module name '{}'", name);
  for (const auto& c : children_) TESSERA_CHECK(c.first != name, "module '{}' registered twice", name);
  children_.emplace_back(std::move(name), child);
}

void Module::Walk(const std::string& prefix,
                  const std::function<void(const std::string&, const Param&)>& fn) const {
  for (const Param& p : params_) fn(prefix + p.name, p);
  for (const auto& [name, child] : children_) child->Walk(prefix + name + ".", fn);
}

void Module::WalkBuffers(const std::string& prefix,
                         const std::function<void(const std::string&, const Param&)>& fn) const {
  for (const Param& p : buffers_) fn(prefix + p.name, p);
  for (const auto& [name, child] : children_) child->WalkBuffers(prefix + name + ".", fn);
}

std::vector<NamedTensor> Module::NamedBuffers() const {
  std::vector<NamedTensor> out;
  WalkBuffers("", [&](const std::string& name, const Param& p) { out.emplace_back(name, p.value); });
  return out;
}

std::vector<NamedTensor> Module::NamedParameters() const {
  std::vector<NamedTensor> out;
  Walk("", [&](const std::string& name, const Param& p) { out.emplace_back(name, p.value); });
  return out;
}

std::vector<Tensor> Module::Parameters() const {
  std::vector<Tensor> out;
  Walk("", [&](const std::string&, const Param& p) { out.push_back(p.value); });
  return out;
}

int64_t Module::NumParameters() const {
  int64_t n = 0;
  Walk("", [&](const std::string&, const Param& p) { n += p.value.numel(); });
  return n;
}

std::map<std::string, Tensor> Module::StateDict() const {
  std::map<std::string, Tensor> out;
  Walk("", [&](const std::string& name, const Param& p) { out.emplace(name, p.value); });
  return out;
}

Status Module::LoadStateDict(const std::map<std::string, Tensor>& state) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (dst, src)
  Walk("", [&](const std::string& name, const Param& p) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      problems.push_back(fmt::format("missing key '{}' (expected shape {} {})", name, ShapeString(p.value.shape()),
                                     DTypeName(p.value.dtype())));
      return;
    }
    const Tensor& src = it->second;
    if (!src.defined()) {
      problems.push_back(fmt::format("key '{}' holds an undefined tensor", name));
    } else if (src.shape() != p.value.shape()) {
      problems.push_back(fmt::format("shape mismatch for '{}': checkpoint has {}, model expects {}", name,
                                     ShapeString(src.shape()), ShapeString(p.value.shape())));
    } else if (src.dtype() != p.value.dtype()) {
      problems.push_back(fmt::format("dtype mismatch for '{}': checkpoint has {}, model expects {}", name,
                                     DTypeName(src.dtype()), DTypeName(p.value.dtype())));
    } else {
      copies.emplace_back(p.value, src);
    }
  });
  for (const auto& [name, tensor] : state) {
    if (!known.count(name)) {
      problems.push_back(fmt::format("unexpected key '{}' (shape {})", name,
                                     tensor.defined() ? ShapeString(tensor.shape()) : "undefined"));
    }
  }
  if (!problems.empty()) {
    constexpr size_t kMaxShown = 10;
    std::string text;
    for (size_t i = 0; i < problems.size() && i < kMaxShown; ++i) text += "\n  " + problems[i];
    if (problems.size() > kMaxShown) text += fmt::format("\n  ... and {} more", problems.size() - kMaxShown);
    return InvalidArgument("state dict does not match the model ({} problem{}):{}", problems.size(),
                           problems.size() == 1 ? "" : "s", text);
  }
  for (auto& [dst, src] : copies) {
    if (dst.impl() != src.impl()) dst.CopyFrom(src);
  }
  return Status::Ok();
}

void Module::ZeroGrad(bool set_to_none) {
  Walk("", [set_to_none](const std::string&, const Param& p) {
    Tensor t = p.value;
    if (set_to_none) {
      t.ZeroGrad();
    } else if (Tensor g = t.grad(); g.defined()) {
      g.ZeroFill();
    }
  });
}

void Module::SetTraining(bool training) {
  training_ = training;
  for (auto& child : children_) child.second->SetTraining(training);
}

void Module::InitParameters(uint64_t seed) {
  auto fill = [seed](const std::string& name, const Param& p) {
    Tensor t = p.value;
    t.set_name(name);
    uint64_t stream = DeriveSeed(seed, NameHash(name));
    switch (p.init.kind) {
      case ParamInit::Kind::kKeep: break;
      case ParamInit::Kind::kZeros: t.Fill(0.0); break;
      case ParamInit::Kind::kOnes: t.Fill(1.0); break;
      case ParamInit::Kind::kNormal: FillNormal(t, stream, p.init.a, p.init.b); break;
      case ParamInit::Kind::kUniform: FillUniform(t, stream, p.init.a, p.init.b); break;
    }
  };
  Walk("", fill);
  WalkBuffers("", fill);
}

}  // namespace tessera::graph

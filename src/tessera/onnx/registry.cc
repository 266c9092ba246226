#include "tessera/onnx/op.h"

namespace tessera::onnx {

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry;
    RegisterElementwiseOps(*r);
    RegisterReduceOps(*r);
    RegisterShapeOps(*r);
    RegisterIndexOps(*r);
    RegisterNnOps(*r);
    RegisterRnnOps(*r);
    RegisterQuantOps(*r);
    RegisterControlOps(*r);
    RegisterRandomOps(*r);
    RegisterLossOps(*r);
    RegisterMiscOps(*r);
    return r;
  }();
  return *registry;
}

namespace {
std::string Key(const std::string& domain, const std::string& op_type) {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  return d + ":" + op_type;
}
}  // namespace

void OpRegistry::Register(const std::string& op_type, Kernel kernel, const std::string& domain) {
  kernels_[Key(domain, op_type)] = std::move(kernel);
}

const Kernel* OpRegistry::Find(const std::string& domain, const std::string& op_type) const {
  auto it = kernels_.find(Key(domain, op_type));
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [key, kernel] : kernels_) names.push_back(key[0] == ':' ? key.substr(1) : key);
  return names;
}

}  // namespace tessera::onnx

// Module: a tree of named parameters and sub-modules (torch.nn.Module style).
//
// A module registers its parameters (leaf tensors with requires_grad) and
// its children under local names; the tree gives every parameter a dotted
// name such as "blocks.0.attn.wq.weight", in registration order. The state
// dict maps those names to the parameter tensors (aliases, not copies).
//
// Initialization is separate from construction: each parameter carries a
// ParamInit rule, and InitParameters(seed) on the root fills every parameter
// from a counter-based stream seeded by (seed, full dotted name). Values thus
// depend only on the seed and the name — not on construction order, on which
// thread builds which module, or on how many threads fill a tensor. It also
// sets each parameter's Tensor::name() to its dotted name.
//
// Buffers (RegisterBuffer) are non-trainable state such as batch norm's
// running statistics: named like parameters, filled by InitParameters, never
// given requires_grad, listed by NamedBuffers() and not by the parameter
// functions or StateDict (which hold what an optimizer updates).
//
// Modules are not copyable or movable (children are registered by address).
// Thread-safety: none; build and mutate a module from one thread. Forward
// passes through distinct threads are fine if parameters are not mutated.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/tensor/tensor.h"

namespace tessera::graph {

struct ParamInit {
  enum class Kind { kKeep, kZeros, kOnes, kNormal, kUniform };
  Kind kind = Kind::kKeep;
  float a = 0.0f;  // normal: mean; uniform: low
  float b = 0.0f;  // normal: stddev; uniform: high

  static ParamInit Keep() { return {}; }  // leave the registered value
  static ParamInit Zeros() { return {Kind::kZeros, 0, 0}; }
  static ParamInit Ones() { return {Kind::kOnes, 0, 0}; }
  static ParamInit Normal(float stddev, float mean = 0.0f) { return {Kind::kNormal, mean, stddev}; }
  static ParamInit Uniform(float low, float high) { return {Kind::kUniform, low, high}; }
};

using NamedTensor = std::pair<std::string, Tensor>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Parameters of this module and all descendants, in registration order,
  // with dotted names.
  std::vector<NamedTensor> NamedParameters() const;
  std::vector<Tensor> Parameters() const;
  int64_t NumParameters() const;  // total elements
  // name -> parameter (aliases the live tensors).
  std::map<std::string, Tensor> StateDict() const;
  // Buffers of this module and all descendants, dotted names, in order.
  std::vector<NamedTensor> NamedBuffers() const;
  // Copies values into the parameters. Every parameter must be present with
  // the same shape and dtype, and no other key may be present; otherwise
  // nothing is copied and the error lists the offending keys (missing,
  // unexpected, shape or dtype mismatch with both shapes/dtypes).
  Status LoadStateDict(const std::map<std::string, Tensor>& state);
  // Drops every parameter's gradient (set_to_none), or zero-fills existing
  // gradient buffers in place so the next Backward accumulates into them.
  void ZeroGrad(bool set_to_none = true);
  // Training mode (dropout active) for this module and all descendants.
  void SetTraining(bool training);
  bool training() const { return training_; }
  // Fills every parameter per its ParamInit (see the header comment).
  void InitParameters(uint64_t seed);

 protected:
  // Registers a parameter (sets requires_grad) and returns the handle.
  Tensor RegisterParameter(std::string name, Tensor value, ParamInit init = ParamInit::Keep());
  // Registers a buffer (not trainable; see the header comment).
  Tensor RegisterBuffer(std::string name, Tensor value, ParamInit init = ParamInit::Keep());
  // Registers a child; `child` must outlive this module's use (normally a
  // member or a unique_ptr owned by this module).
  void RegisterModule(std::string name, Module* child);

 private:
  struct Param {
    std::string name;
    Tensor value;
    ParamInit init;
  };
  void Walk(const std::string& prefix, const std::function<void(const std::string&, const Param&)>& fn) const;
  void WalkBuffers(const std::string& prefix,
                   const std::function<void(const std::string&, const Param&)>& fn) const;
  void CheckNewName(const std::string& name, const char* what) const;

  std::vector<Param> params_;
  std::vector<Param> buffers_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

// Stable 64-bit hash of a parameter name (FNV-1a), the per-name init stream.
uint64_t NameHash(std::string_view name);

}  // namespace tessera::graph

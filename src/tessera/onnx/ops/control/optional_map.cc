// Optional, OptionalHasElement, OptionalGetElement, and SequenceMap (runs
// its body once per sequence position).
#include <memory>

#include "tessera/onnx/ops/control/control_util.h"

namespace tessera::onnx::control {

Status OptionalKernel(OpContext& ctx) {
  if (!ctx.has_input(0)) {
    ctx.set_value(0, Value::Optional(nullptr));
    return Status::Ok();
  }
  const Value& v = ctx.input(0);
  if (v.kind == Value::Kind::kOptional) {  // already an optional: pass through
    ctx.set_value(0, v);
    return Status::Ok();
  }
  if (v.kind != Value::Kind::kTensor && v.kind != Value::Kind::kSequence) {
    return ctx.Error("input must be a tensor or a sequence, got {}", v.Describe());
  }
  ctx.set_value(0, Value::Optional(std::make_shared<Value>(v)));
  return Status::Ok();
}

Status OptionalHasElementKernel(OpContext& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Value& v = ctx.input(0);
    has = v.kind == Value::Kind::kOptional ? v.optional != nullptr && v.optional->kind != Value::Kind::kNone
                                           : v.kind != Value::Kind::kNone;
  }
  ctx.set_output(0, Array::Scalar<bool>(has));
  return Status::Ok();
}

Status OptionalGetElementKernel(OpContext& ctx) {
  if (!ctx.has_input(0)) return ctx.Error("input 0 is required");
  const Value& v = ctx.input(0);
  if (v.kind == Value::Kind::kOptional) {
    if (v.optional == nullptr || v.optional->kind == Value::Kind::kNone) return ctx.Error("the optional is empty");
    ctx.set_value(0, *v.optional);
    return Status::Ok();
  }
  if (v.kind == Value::Kind::kNone) return ctx.Error("the input holds no value");
  ctx.set_value(0, v);  // a plain tensor / sequence is returned as is (opset 18)
  return Status::Ok();
}

// SequenceMap(input_sequence, additional_inputs...): additional sequences
// are walked in step with the first; tensors are passed to every call.
Status SequenceMapKernel(OpContext& ctx) {
  const Graph* body = ctx.node().Subgraph("body");
  if (body == nullptr) return ctx.Error("attribute 'body' (a graph) is required");
  const size_t n_in = ctx.node().inputs.size();
  if (n_in == 0) return ctx.Error("input 0 (a sequence) is required");
  if (body->inputs.size() != n_in)
    return ctx.Error("the body takes {} inputs, the node has {}", body->inputs.size(), n_in);
  if (body->outputs.size() < ctx.num_outputs()) {
    return ctx.Error("the body gives {} outputs, the node has {}", body->outputs.size(), ctx.num_outputs());
  }
  std::vector<const Value*> ins;
  int64_t len = -1;
  for (size_t i = 0; i < n_in; ++i) {
    if (!ctx.has_input(i)) return ctx.Error("input {} is missing", i);
    const Value* v = &ctx.input(i);
    if (v->kind == Value::Kind::kOptional && v->optional) v = v->optional.get();
    if (v->kind == Value::Kind::kSequence) {
      const int64_t n = static_cast<int64_t>(v->sequence.size());
      if (len >= 0 && n != len) return ctx.Error("input sequence {} has {} elements, not {}", i, n, len);
      len = n;
    } else if (i == 0 || !v->is_tensor()) {
      return ctx.Error("input {} must be a {}, got {}", i, i == 0 ? "sequence" : "sequence or tensor", v->Describe());
    }
    ins.push_back(v);
  }
  std::vector<std::vector<Array>> outs(body->outputs.size());
  for (int64_t p = 0; p < len; ++p) {
    std::vector<Value> args;
    for (const Value* v : ins) {
      args.push_back(v->kind == Value::Kind::kSequence ? Value::Tensor(v->sequence[static_cast<size_t>(p)]) : *v);
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<Value> res, ctx.RunSubgraph(*body, args));
    if (res.size() != outs.size()) return ctx.Error("the body returned {} values", res.size());
    for (size_t k = 0; k < res.size(); ++k) {
      if (!res[k].is_tensor()) return ctx.Error("body output {} must be a tensor, got {}", k, res[k].Describe());
      outs[k].push_back(std::move(res[k].tensor));
    }
  }
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    ElemType t = body->outputs[k].elem;
    if (!outs[k].empty()) t = outs[k][0].type();
    if (t == ElemType::kUndefined) t = ElemType::kFloat;
    ctx.set_value(k, Value::Sequence(std::move(outs[k]), t));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx::control

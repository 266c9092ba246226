// If and Loop: run their subgraphs with ctx.RunSubgraph (outer-scope values
// are visible to the bodies); Loop stacks its scan outputs along axis 0.
#include "tessera/onnx/ops/control/control_util.h"

#include <algorithm>

namespace tessera::onnx::control {

Status IfKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(bool cond, CondInput(ctx, 0));
  const char* branch = cond ? "then_branch" : "else_branch";
  const Graph* g = ctx.node().Subgraph(branch);
  if (g == nullptr) return ctx.Error("attribute '{}' (a graph) is required", branch);
  TESSERA_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.RunSubgraph(*g, {}));
  if (outs.size() < ctx.num_outputs()) {
    return ctx.Error("{} has {} outputs, the node {}", branch, outs.size(), ctx.num_outputs());
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_value(i, std::move(outs[i]));
  return Status::Ok();
}

// Loop(M, cond, v_initial...) -> (v_final..., scan_outputs...).
Status LoopKernel(OpContext& ctx) {
  const Graph* body = ctx.node().Subgraph("body");
  if (body == nullptr) return ctx.Error("attribute 'body' (a graph) is required");
  const size_t num_inputs = std::max<size_t>(ctx.node().inputs.size(), 2);
  const size_t n_carried = num_inputs - 2;
  if (body->inputs.size() != n_carried + 2) {
    return ctx.Error("the body takes {} inputs, expected 2 + {} loop-carried values", body->inputs.size(), n_carried);
  }
  if (body->outputs.size() < n_carried + 1) {
    return ctx.Error("the body has {} outputs, expected at least 1 + {}", body->outputs.size(), n_carried);
  }
  const size_t n_scan = body->outputs.size() - 1 - n_carried;
  if (ctx.num_outputs() > n_carried + n_scan) {
    return ctx.Error("the node has {} outputs, the body gives {} carried + {} scan values", ctx.num_outputs(),
                     n_carried, n_scan);
  }
  int64_t max_trip = -1;  // -1: no limit
  if (ctx.has_input(0)) {
    TESSERA_ASSIGN_OR_RETURN(Array m, ctx.tensor(0));
    if (m.numel() != 1 || !IsIntegerType(m.type())) {
      return ctx.Error("trip count M must be one integer, got {}{}", ElemName(m.type()), m.ShapeString());
    }
    max_trip = std::max<int64_t>(m.GetInt(0), 0);
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    TESSERA_ASSIGN_OR_RETURN(cond, CondInput(ctx, 1));
  }
  std::vector<Value> carried;
  for (size_t i = 0; i < n_carried; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.Error("loop-carried input {} is missing", 2 + i);
    carried.push_back(ctx.input(2 + i));
  }
  std::vector<std::vector<Array>> scans(n_scan);
  for (int64_t it = 0; (max_trip < 0 || it < max_trip) && cond; ++it) {
    std::vector<Value> args;
    args.reserve(n_carried + 2);
    args.push_back(Value::Tensor(Array::Scalar<int64_t>(it)));
    args.push_back(Value::Tensor(Array::Scalar<bool>(cond)));
    for (Value& v : carried) args.push_back(std::move(v));
    TESSERA_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.RunSubgraph(*body, args));
    if (outs.size() != body->outputs.size()) return ctx.Error("the body returned {} values", outs.size());
    const Value& c = outs[0];
    const Array* ca = c.is_tensor() ? &c.tensor
                      : (c.kind == Value::Kind::kOptional && c.optional && c.optional->is_tensor())
                          ? &c.optional->tensor
                          : nullptr;
    if (ca == nullptr || ca->numel() != 1 || ca->type() == ElemType::kString) {
      return ctx.Error("the body's condition output must be one bool, got {}", c.Describe());
    }
    cond = ca->GetDouble(0) != 0;
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t k = 0; k < n_scan; ++k) {
      Value& s = outs[1 + n_carried + k];
      if (!s.is_tensor()) return ctx.Error("scan output {} of the body must be a tensor, got {}", k, s.Describe());
      scans[k].push_back(std::move(s.tensor));
    }
  }
  for (size_t i = 0; i < n_carried && i < ctx.num_outputs(); ++i) ctx.set_value(i, std::move(carried[i]));
  for (size_t k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
    if (!ctx.output_wanted(n_carried + k)) continue;
    if (scans[k].empty()) {
      ctx.set_output(n_carried + k, EmptyStacked(body->outputs[1 + n_carried + k]));
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(Array stacked, Stack(ctx, scans[k], 0, "iteration's scan output"));
    ctx.set_output(n_carried + k, std::move(stacked));
  }
  return Status::Ok();
}

}  // namespace tessera::onnx::control

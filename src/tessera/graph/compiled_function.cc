#include "tessera/graph/compiled_function.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/base/logging.h"
#include "tessera/graph/autodiff.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

std::string Signature(const std::vector<Tensor>& inputs) {
  std::string s = fmt::format("grad={};", GradEnabled() ? 1 : 0);
  for (const Tensor& t : inputs) {
    s += t.defined() ? fmt::format("{}{}{}{};", DTypeName(t.dtype()), ShapeString(t.shape()),
                                   t.requires_grad() ? "g" : "", t.is_contiguous() ? "" : "s")
                     : "_;";
  }
  return s;
}

int Root(const Graph& g, int v) { return g.values[v].alias_of >= 0 ? g.values[v].alias_of : v; }

// Whether the graph's outputs match eager's: bitwise for integers, a tight
// relative tolerance for floats (a fused GEMM epilogue may round differently).
std::string Compare(const std::vector<Tensor>& eager, const std::vector<Tensor>& graph) {
  if (eager.size() != graph.size()) return fmt::format("{} outputs against eager's {}", graph.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    if (eager[i].shape() != graph[i].shape() || eager[i].dtype() != graph[i].dtype()) {
      return fmt::format("output {}: {} {} against eager's {} {}", i, DTypeName(graph[i].dtype()),
                         ShapeString(graph[i].shape()), DTypeName(eager[i].dtype()), ShapeString(eager[i].shape()));
    }
    std::vector<float> a = eager[i].ToFloatVector(), b = graph[i].ToFloatVector();
    for (size_t k = 0; k < a.size(); ++k) {
      const float tol = IsFloating(eager[i].dtype()) ? 1e-5f * (1.0f + std::fabs(a[k])) : 0.0f;
      if (!(std::fabs(a[k] - b[k]) <= tol)) {
        return fmt::format("output {} element {}: graph {} against eager {}", i, k, b[k], a[k]);
      }
    }
  }
  return "";
}

}  // namespace

std::unique_ptr<CompiledGraph> Compile(Graph forward, const PassOptions& options, bool inter_op) {
  auto c = std::make_unique<CompiledGraph>();
  Graph& g = c->graph;
  g = std::move(forward);
  AddBackward(g);
  c->unoptimized = g;
  c->report = RunPasses(g, options);
  const int n = static_cast<int>(g.nodes.size());
  const int fwd_end = g.forward_nodes();
  c->last_use.assign(g.values.size(), -1);
  c->last_use_forward.assign(g.values.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (int v : g.nodes[i].inputs) {
      if (v < 0) continue;
      const int r = Root(g, v);
      for (int x : {v, r}) {
        c->last_use[x] = std::max(c->last_use[x], i);
        if (i < fwd_end) c->last_use_forward[x] = std::max(c->last_use_forward[x], i);
      }
    }
  }
  c->pinned.assign(g.values.size(), false);
  for (int v : g.outputs) c->pinned[v] = true;
  for (int v : g.input_grads) {
    if (v >= 0) c->pinned[v] = true;
  }
  for (int v : g.param_grads) {
    if (v >= 0) c->pinned[v] = true;
  }
  // Memory plan over forward + backward: one buffer per computed root value,
  // live from its producer to its last reader (values leaving the graph live
  // to the end of their half).
  std::unordered_set<int> escaping(g.outputs.begin(), g.outputs.end());
  for (int v : g.input_grads) escaping.insert(v);
  for (int v : g.param_grads) escaping.insert(v);
  std::vector<BufferRequest> requests;
  for (const Value& v : g.values) {
    if (v.kind != ValueKind::kNode || v.alias_of >= 0 || v.producer < 0 || v.bytes() == 0) continue;
    int last = std::max(c->last_use[v.id], v.producer);
    if (escaping.count(v.id)) last = std::max(last, v.producer < fwd_end ? fwd_end - 1 : n - 1);
    requests.push_back({v.bytes(), v.producer, last});
    c->planned_values.push_back(v.id);
    if (v.producer < fwd_end && last >= fwd_end && !escaping.count(v.id)) c->graph_saved_bytes += v.bytes();
  }
  const int threads = inter_op ? 0 : 1;
  c->forward_train = PlanInterOp(g, 0, fwd_end, c->last_use, c->pinned, threads);
  c->forward_infer = PlanInterOp(g, 0, fwd_end, c->last_use_forward, c->pinned, threads);
  c->backward = PlanInterOp(g, fwd_end, n, c->last_use, c->pinned, threads);
  c->plan = PlanMemory(requests);
  const std::string invalid = ValidateMemoryPlan(requests, c->plan);
  TESSERA_CHECK(invalid.empty(), "graph memory plan: {}", invalid);
  // What the eager tape would keep after the forward: every input and output
  // of a recorded entry (TapeEntry holds them all until the backward).
  std::unordered_set<int> kept;
  const Graph& u = c->unoptimized;
  for (int i = 0; i < u.forward_nodes(); ++i) {
    const Node& nd = u.nodes[i];
    bool recorded = false;
    for (int v : nd.inputs) recorded = recorded || (v >= 0 && u.values[v].requires_grad);
    if (!recorded || !nd.grad) continue;
    for (int v : nd.inputs) {
      if (v >= 0 && u.values[Root(u, v)].kind == ValueKind::kNode) kept.insert(Root(u, v));
    }
    for (int v : nd.outputs) {
      if (v >= 0 && u.values[Root(u, v)].kind == ValueKind::kNode) kept.insert(Root(u, v));
    }
  }
  for (int v : kept) c->eager_saved_bytes += u.values[v].bytes();
  return c;
}

struct GraphFunction::Entry {
  int calls = 0;
  int replays = 0;
  std::string fallback;  // non-empty: eager
  std::unique_ptr<CompiledGraph> compiled;
};

GraphFunction::GraphFunction(std::string name, Fn fn, GraphOptions options)
    : name_(std::move(name)), fn_(std::move(fn)), options_(std::move(options)) {}

GraphFunction::~GraphFunction() = default;

const CompiledGraph* GraphFunction::compiled() const {
  return last_ != nullptr && last_->fallback.empty() ? last_->compiled.get() : nullptr;
}

std::vector<GraphFunction::SignatureInfo> GraphFunction::signatures() const {
  std::vector<SignatureInfo> out;
  for (const auto& [sig, e] : entries_) {
    out.push_back({sig, sig.rfind("grad=1", 0) == 0, e->calls, e->replays, e->fallback,
                   e->fallback.empty() ? e->compiled.get() : nullptr});
  }
  return out;
}

std::string GraphFunction::fallback_reason() const { return last_ != nullptr ? last_->fallback : ""; }

std::vector<Tensor> GraphFunction::Replay(Entry& e, const std::vector<Tensor>& inputs) {
  CompiledGraph& c = *e.compiled;
  const Graph& g = c.graph;
  const int fwd_end = g.forward_nodes();
  auto slot = std::make_shared<std::vector<Tensor>>(g.values.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) (*slot)[g.inputs[i]] = inputs[i];
  for (const Value& v : g.values) {
    if (v.kind == ValueKind::kParam || v.kind == ValueKind::kConst) (*slot)[v.id] = v.bound;
  }
  bool train = false;
  if (GradEnabled()) {
    for (int v : g.param_grads) train = train || v >= 0;
    for (int v : g.input_grads) train = train || v >= 0;
  }
  {
    NoGradGuard no_grad;
    RunInterOp(g, train ? c.forward_train : c.forward_infer, *slot);
  }
  std::vector<Tensor> outputs;
  for (int v : g.outputs) outputs.push_back((*slot)[v]);
  // Outputs nobody reads later leave the frame (the caller holds them).
  for (int v : g.outputs) {
    if ((train ? c.last_use[v] : c.last_use_forward[v]) < fwd_end) (*slot)[v] = Tensor();
  }
  if (!train) return outputs;
  // One tape entry for the whole graph: differentiable outputs -> inputs and parameters.
  std::vector<Tensor> tape_inputs;
  std::vector<int> grad_values;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    tape_inputs.push_back(inputs[i]);
    grad_values.push_back(g.input_grads[i]);
  }
  for (size_t p = 0; p < g.params.size(); ++p) {
    if (g.param_grads[p] < 0) continue;
    tape_inputs.push_back(g.values[g.params[p]].bound);
    grad_values.push_back(g.param_grads[p]);
  }
  std::vector<Tensor> tape_outputs;
  std::vector<int> seeds;
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    if (g.output_grads[o] < 0) continue;
    tape_outputs.push_back(outputs[o]);
    seeds.push_back(g.output_grads[o]);
  }
  CompiledGraph* cp = e.compiled.get();
  Record("GraphFunction", tape_inputs, tape_outputs,
         [cp, slot, seeds, grad_values](const std::vector<Tensor>& grads, const std::vector<bool>&) {
           std::vector<Tensor>& s = *slot;
           for (size_t i = 0; i < seeds.size(); ++i) s[seeds[i]] = grads[i];
           NoGradGuard no_grad;
           RunInterOp(cp->graph, cp->backward, s);
           std::vector<Tensor> result;
           for (int v : grad_values) result.push_back(v >= 0 ? s[v] : Tensor());
           s.clear();
           return result;
         });
  return outputs;
}

std::vector<Tensor> GraphFunction::Call(const Fn& fn, const std::vector<Tensor>& inputs) {
  std::unique_ptr<Entry>& slot = entries_[Signature(inputs)];
  if (!slot) slot = std::make_unique<Entry>();
  Entry& e = *slot;
  last_ = &e;
  e.calls += 1;
  if (!e.fallback.empty()) return fn(inputs);
  if (e.calls == 1) {
    Trace trace;
    std::vector<Tensor> out;
    try {
      TraceScope scope(trace);
      out = fn(inputs);
    } catch (...) {
      e.calls = 0;  // the function failed (bad input): capture again on the next call
      throw;
    }
    StatusOr<Graph> g = GraphFromTrace(trace, inputs, out);
    if (!g.ok()) {
      e.fallback = g.status().message();
    } else {
      try {
        e.compiled = Compile(std::move(g).value(), options_.passes, options_.inter_op);
      } catch (const std::exception& ex) {
        e.fallback = fmt::format("compiling the graph failed: {}", ex.what());
      }
    }
    if (!e.fallback.empty()) {
      TLOG(INFO, "graph mode: '{}' runs eagerly (graph break): {}", name_, e.fallback);
    } else {
      TLOG(DEBUG, "graph mode: '{}' captured: {} nodes; {}", name_, e.compiled->graph.nodes.size(),
           e.compiled->report.ToString());
    }
    return out;
  }
  if (e.calls == 2 && options_.verify) {
    std::vector<Tensor> eager = fn(inputs);
    std::vector<Tensor> replayed;
    std::string diff;
    // The check runs the function a second time: buffers that operators
    // with effects update in place (batch norm's running statistics) are
    // restored afterwards to what the eager run left.
    std::vector<std::pair<Tensor, Tensor>> restore;  // (buffer, its copy)
    if (e.compiled) {
      const Graph& g = e.compiled->graph;
      for (const Node& nd : g.nodes) {
        if (!nd.side_effects || nd.kind == OpKind::kCommunication) continue;
        for (int v : nd.inputs) {
          if (v < 0 || g.values[v].kind != ValueKind::kConst || !g.values[v].bound.defined()) continue;
          const Tensor& b = g.values[v].bound;
          bool seen = false;
          for (const auto& r : restore) seen = seen || r.first.impl() == b.impl();
          if (!seen) restore.emplace_back(b, b.Clone());
        }
      }
    }
    try {
      NoGradGuard no_grad;
      replayed = Replay(e, inputs);
      diff = Compare(eager, replayed);
    } catch (const std::exception& ex) {
      diff = fmt::format("the replay failed: {}", ex.what());
    }
    for (auto& [buffer, copy] : restore) buffer.CopyFrom(copy);
    if (!diff.empty()) {
      e.fallback = fmt::format(
          "the graph's result differs from eager ({}): the function depends on something "
          "the trace cannot see",
          diff);
      e.compiled.reset();
      TLOG(WARN, "graph mode: '{}' runs eagerly: {}", name_, e.fallback);
    }
    return eager;
  }
  ++replays_;
  ++e.replays;
  return Replay(e, inputs);
}

}  // namespace tessera::graph

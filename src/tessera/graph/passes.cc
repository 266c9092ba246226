#include "tessera/graph/passes.h"

#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "tessera/graph/fused_kernels.h"
#include "tessera/graph/recompute.h"

namespace tessera::graph {
namespace {

// Drops nodes flagged in `dead` and renumbers producers.
void Compact(Graph& g, const std::vector<bool>& dead) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
  for (Value& v : g.values) {
    if (v.kind == ValueKind::kNode) v.producer = -1;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int o : g.nodes[i].outputs) {
      if (o >= 0) g.values[o].producer = static_cast<int>(i);
    }
  }
}

void ReplaceUses(Graph& g, const std::vector<int>& replace) {
  auto fix = [&](int& v) {
    while (v >= 0 && replace[v] >= 0) v = replace[v];
  };
  for (Node& n : g.nodes) {
    for (int& v : n.inputs) fix(v);
  }
  for (int& v : g.outputs) fix(v);
  for (int& v : g.input_grads) fix(v);
  for (int& v : g.param_grads) fix(v);
}

// Number of node inputs reading each value, and whether it leaves the graph.
std::vector<int> Readers(const Graph& g) {
  std::vector<int> readers(g.values.size(), 0);
  for (const Node& n : g.nodes) {
    for (int v : n.inputs) {
      if (v >= 0) readers[v] += 1;
    }
  }
  auto escape = [&](int v) {
    if (v >= 0) readers[v] += 1000000;
  };
  for (int v : g.outputs) escape(v);
  for (int v : g.input_grads) escape(v);
  for (int v : g.param_grads) escape(v);
  return readers;
}

}  // namespace

std::string PassReport::ToString() const {
  return fmt::format(
      "dce removed {} nodes, constant folding {}, cse merged {}, fusion {} groups of {} ops, recompute {} nodes "
      "(kept for the backward {:.3f} -> {:.3f} MiB)",
      removed_dead, folded, merged_common, fused_groups, fused_ops, recomputed, kept_before_recompute_bytes / 1048576.0,
      kept_after_recompute_bytes / 1048576.0);
}

int EliminateDeadCode(Graph& g) {
  std::vector<bool> needed(g.values.size(), false);
  for (int v : g.outputs) needed[v] = true;
  for (int v : g.input_grads) {
    if (v >= 0) needed[v] = true;
  }
  for (int v : g.param_grads) {
    if (v >= 0) needed[v] = true;
  }
  std::vector<bool> dead(g.nodes.size(), false);
  int removed = 0;
  for (int i = static_cast<int>(g.nodes.size()) - 1; i >= 0; --i) {
    const Node& n = g.nodes[i];
    bool live = n.side_effects;
    for (int o : n.outputs) live = live || (o >= 0 && needed[o]);
    if (!live) {
      dead[i] = true;
      ++removed;
      continue;
    }
    for (int v : n.inputs) {
      if (v >= 0) needed[v] = true;
    }
  }
  if (removed > 0) Compact(g, dead);
  return removed;
}

int FoldConstants(Graph& g) {
  // Constants an operator with effects writes (running statistics) change
  // between calls: never fold their readers.
  std::vector<bool> written(g.values.size(), false);
  for (const Node& n : g.nodes) {
    if (!n.side_effects) continue;
    for (int v : n.inputs) {
      if (v >= 0) written[v] = true;
    }
  }
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (n.side_effects || n.inputs.empty()) continue;
    bool all_const = true;
    for (int v : n.inputs) all_const = all_const && (v < 0 || (g.values[v].kind == ValueKind::kConst && !written[v]));
    if (!all_const) continue;
    std::vector<Tensor> ins;
    for (int v : n.inputs) ins.push_back(v >= 0 ? g.values[v].bound : Tensor());
    std::vector<Tensor> outs = n.run(ins);
    for (size_t o = 0; o < n.outputs.size() && o < outs.size(); ++o) {
      const int v = n.outputs[o];
      if (v < 0) continue;
      Value& val = g.values[v];
      val.kind = ValueKind::kConst;
      val.producer = -1;
      val.alias_of = -1;
      val.bound = outs[o].Clone();
      val.name = fmt::format("folded:{}", n.op);
    }
    dead[i] = true;
    ++folded;
  }
  if (folded > 0) Compact(g, dead);
  return folded;
}

int EliminateCommonSubexpressions(Graph& g) {
  using Key = std::tuple<std::string, std::string, std::vector<int>>;
  std::map<Key, int> seen;
  std::vector<int> replace(g.values.size(), -1);
  std::vector<bool> dead(g.nodes.size(), false);
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (int& v : n.inputs) {
      while (v >= 0 && replace[v] >= 0) v = replace[v];
    }
    if (n.side_effects || n.backward) continue;
    Key key{n.op, n.attrs, n.inputs};
    auto [it, inserted] = seen.try_emplace(key, static_cast<int>(i));
    if (inserted) continue;
    const Node& first = g.nodes[it->second];
    if (first.outputs.size() != n.outputs.size()) continue;
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o] >= 0) replace[n.outputs[o]] = first.outputs[o];
    }
    dead[i] = true;
    ++merged;
  }
  if (merged > 0) {
    ReplaceUses(g, replace);
    Compact(g, dead);
  }
  return merged;
}

int FuseElementwise(Graph& g, int* fused_ops) {
  int groups = 0;
  *fused_ops = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    const std::vector<int> readers = Readers(g);
    for (size_t i = 0; i + 1 < g.nodes.size() && !changed; ++i) {
      const Node& a = g.nodes[i];
      if (a.backward || a.side_effects || a.outputs.size() != 1 || a.outputs[0] < 0) continue;
      if (a.kind != OpKind::kElementwise && a.kind != OpKind::kOutFusable) continue;
      const int v = a.outputs[0];
      if (readers[v] != 1) continue;  // read once, by the consumer, and not kept for the backward
      for (size_t j = i + 1; j < g.nodes.size(); ++j) {
        Node& b = g.nodes[j];
        bool reads = false;
        for (int in : b.inputs) reads = reads || in == v;
        if (!reads) continue;
        if (b.backward || b.side_effects || b.kind != OpKind::kElementwise) break;
        std::optional<Node> fused = FuseNodes(g, a, b, v);
        if (!fused) break;
        g.nodes[j] = std::move(*fused);
        std::vector<bool> dead(g.nodes.size(), false);
        dead[i] = true;
        Compact(g, dead);
        changed = true;
        break;
      }
    }
  }
  for (const Node& n : g.nodes) {
    if (n.fused.size() > 1) {
      ++groups;
      *fused_ops += static_cast<int>(n.fused.size());
    }
  }
  return groups;
}

PassReport RunPasses(Graph& g, const PassOptions& options) {
  PassReport r;
  if (options.dce) r.removed_dead += EliminateDeadCode(g);
  if (options.constant_folding) r.folded = FoldConstants(g);
  if (options.cse) r.merged_common = EliminateCommonSubexpressions(g);
  if (options.dce) r.removed_dead += EliminateDeadCode(g);
  if (options.fusion) r.fused_groups = FuseElementwise(g, &r.fused_ops);
  if (options.recompute_budget_bytes >= 0) {
    RecomputeReport rr = PlanRecompute(g, options.recompute_budget_bytes);
    r.recomputed = rr.recomputed;
    r.kept_before_recompute_bytes = rr.saved_before_bytes;
    r.kept_after_recompute_bytes = rr.saved_after_bytes;
  }
  return r;
}

}  // namespace tessera::graph

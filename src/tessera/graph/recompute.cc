#include "tessera/graph/recompute.h"

#include <algorithm>
#include <set>

namespace tessera::graph {
namespace {

int Root(const Graph& g, int v) { return g.values[v].alias_of >= 0 ? g.values[v].alias_of : v; }

bool Cheap(const Node& n) {
  return !n.side_effects && !n.backward && n.fused.empty() &&
         (n.kind == OpKind::kElementwise || n.kind == OpKind::kInjective || n.kind == OpKind::kReduction);
}

// Roots of forward-computed values that some backward node reads.
std::set<int> KeptRoots(const Graph& g) {
  std::set<int> kept;
  for (const Node& n : g.nodes) {
    if (!n.backward) continue;
    for (int v : n.inputs) {
      if (v < 0) continue;
      const int r = Root(g, v);
      const Value& val = g.values[r];
      if (val.kind == ValueKind::kNode && val.producer >= 0 && !g.nodes[val.producer].backward) kept.insert(r);
    }
  }
  return kept;
}

}  // namespace

int64_t BytesKeptForBackward(const Graph& g) {
  int64_t bytes = 0;
  for (int r : KeptRoots(g)) bytes += g.values[r].bytes();
  return bytes;
}

RecomputeReport PlanRecompute(Graph& g, int64_t budget_bytes) {
  RecomputeReport rep;
  rep.saved_before_bytes = rep.saved_after_bytes = BytesKeptForBackward(g);
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  while (budget_bytes == 0 || rep.saved_after_bytes > budget_bytes) {
    const std::set<int> kept = KeptRoots(g);
    // Values backward nodes read directly, and roots they read through views
    // (recomputing a root does not free it while a view of it is kept).
    std::set<int> direct, through_view;
    for (const Node& n : g.nodes) {
      if (!n.backward) continue;
      for (int v : n.inputs) {
        if (v < 0) continue;
        (g.values[v].alias_of >= 0 ? through_view : direct).insert(Root(g, v));
        if (g.values[v].alias_of < 0) direct.insert(v);
      }
    }
    // The best candidate: the largest net saving.
    int best = -1;
    int64_t best_gain = 0;
    for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
      const Node& n = g.nodes[i];
      if (!Cheap(n) || n.recompute_of >= 0) continue;
      int64_t freed = 0;
      bool ok = true;
      for (int o : n.outputs) {
        if (o < 0) continue;
        if (g.values[o].alias_of >= 0 || outputs.count(o) || through_view.count(o)) ok = false;
        if (kept.count(o) && direct.count(o)) freed += g.values[o].bytes();
      }
      if (!ok || freed == 0) continue;
      int64_t cost = 0;
      for (int v : n.inputs) {
        if (v < 0) continue;
        const int r = Root(g, v);
        if (g.values[r].kind == ValueKind::kNode && !kept.count(r)) cost += g.values[r].bytes();
      }
      if (freed - cost > best_gain) {
        best_gain = freed - cost;
        best = i;
      }
    }
    if (best < 0) break;
    // Copy the node in front of its first backward reader; backward readers use the copy.
    const Node original = g.nodes[best];
    int first_reader = -1;
    for (int i = 0; i < static_cast<int>(g.nodes.size()) && first_reader < 0; ++i) {
      if (!g.nodes[i].backward) continue;
      for (int v : g.nodes[i].inputs) {
        if (v >= 0 && std::find(original.outputs.begin(), original.outputs.end(), v) != original.outputs.end()) {
          first_reader = i;
        }
      }
    }
    if (first_reader < 0) break;  // not read directly by the backward (cannot happen: freed > 0)
    Node copy = original;
    copy.recompute_of = best;
    copy.backward = true;
    std::vector<int> remap(g.values.size(), -1);
    for (int& o : copy.outputs) {
      if (o < 0) continue;
      Value v = g.values[o];
      v.name = v.name.empty() ? "" : v.name + "'";
      const int id = g.AddValue(std::move(v));
      remap.resize(g.values.size(), -1);
      remap[o] = id;
      o = id;
    }
    for (Node& n : g.nodes) {
      if (!n.backward) continue;
      for (int& v : n.inputs) {
        if (v >= 0 && v < static_cast<int>(remap.size()) && remap[v] >= 0) v = remap[v];
      }
    }
    g.nodes.insert(g.nodes.begin() + first_reader, std::move(copy));
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      for (int o : g.nodes[i].outputs) {
        if (o >= 0) g.values[o].producer = static_cast<int>(i);
      }
    }
    rep.recomputed += 1;
    rep.saved_after_bytes = BytesKeptForBackward(g);
  }
  return rep;
}

}  // namespace tessera::graph

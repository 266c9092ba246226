#include "tessera/graph/inter_op.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "tessera/base/check.h"
#include "tessera/graph/tape.h"
#include "tessera/ops/common/impl.h"

namespace tessera::graph {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Effects and communication keep their place in graph order: collectives
// run on every rank in the same order, on the calling thread.
bool Barrier(const Node& n) { return n.side_effects || n.kind == OpKind::kCommunication; }

int64_t Numel(const Graph& g, int v) { return v >= 0 ? NumElements(g.values[v].shape) : 0; }

int64_t LastDim(const Graph& g, int v) { return v >= 0 && !g.values[v].shape.empty() ? g.values[v].shape.back() : 1; }

}  // namespace

double EstimateNodeCost(const Graph& g, const Node& nd) {
  // Nominal single-thread rates: small GEMMs with packing reach ~60 GFLOP/s
  // with AVX-512; other operators are bandwidth-bound on cache-resident data.
  constexpr double kFlopsPerNs = 60.0, kBytesPerNs = 20.0, kOverheadNs = 500.0;
  auto in = [&](size_t i) { return i < nd.inputs.size() ? nd.inputs[i] : -1; };
  double flops = 0;
  const std::string& op = nd.fused.empty() ? nd.op : nd.fused.front();
  const bool grad = nd.backward && op.size() > 4 && op.compare(op.size() - 4, 4, "Grad") == 0;
  const std::string base = grad ? op.substr(0, op.size() - 4) : op;
  if (base == "Linear" || base == "MatMul") {
    // forward (x, w): 2 * numel(out) * K; backward (dy, x, w): dx and dw.
    const int x = grad ? in(1) : in(0);
    const int64_t k = LastDim(g, x);
    const int64_t out = grad ? Numel(g, in(0)) : (nd.outputs.empty() ? 0 : Numel(g, nd.outputs[0]));
    // A split backward node (OpSpec::separable_grad) computes one of them.
    const double products = grad ? static_cast<double>(std::min<size_t>(nd.outputs.size(), 2)) : 1.0;
    flops = 2.0 * static_cast<double>(out) * static_cast<double>(k) * products;
  } else if (base == "CausalAttention" || base == "Attention") {
    // q [B, H, S, D]: QK^T and PV over the causal half; the backward ~2.5x.
    const int q = grad ? in(1) : in(0);
    if (q >= 0 && g.values[q].shape.size() >= 2) {
      const Shape& s = g.values[q].shape;
      const double seq = static_cast<double>(s[s.size() - 2]);
      flops = 2.0 * static_cast<double>(NumElements(s)) * seq * (grad ? 2.5 : 1.0);
    }
  }
  double bytes = 0;
  for (int v : nd.inputs) {
    if (v >= 0) bytes += static_cast<double>(g.values[v].bytes());
  }
  for (int v : nd.outputs) {
    if (v >= 0) bytes += static_cast<double>(g.values[v].bytes());
  }
  return kOverheadNs + flops / kFlopsPerNs + bytes / kBytesPerNs;
}

InterOpSchedule PlanInterOp(const Graph& g, int begin, int end, const std::vector<int>& last_use,
                            const std::vector<bool>& pinned, int threads) {
  InterOpSchedule s;
  s.threads = threads > 0 ? threads : omp_get_max_threads();
  const int n = end - begin;
  if (n <= 0) return s;
  // In-phase producers and consumers of each node (distinct, by index). A
  // view's producer depends on its base's, so the view's alone is an edge.
  std::vector<std::vector<int>> preds(n), succs(n);
  for (int i = begin; i < end; ++i) {
    for (int v : g.nodes[i].inputs) {
      if (v < 0) continue;
      const int p = g.values[v].kind == ValueKind::kNode ? g.values[v].producer : -1;
      if (p < begin || p >= i) continue;
      auto& pr = preds[i - begin];
      if (std::find(pr.begin(), pr.end(), p) == pr.end()) {
        pr.push_back(p);
        succs[p - begin].push_back(i);
      }
    }
  }
  // Chains and their depth. A chain's depth is one more than its producers'
  // and at least that of the chain holding the node just before its head,
  // so steps follow the original order (the recompute planner's placement
  // and the liveness it assumed stay as they were); effect nodes are
  // barriers.
  std::vector<int> chain_of(n, -1);
  std::vector<std::vector<int>> chains;
  std::vector<int> depth;
  int last_effect = begin - 1, effect_floor = 0, max_depth = -1;
  for (int i = begin; i < end; ++i) {
    const Node& nd = g.nodes[i];
    const auto& pr = preds[i - begin];
    if (!Barrier(nd) && pr.size() == 1 && succs[pr[0] - begin].size() == 1 && pr[0] > last_effect &&
        !Barrier(g.nodes[pr[0]])) {
      const int c = chain_of[pr[0] - begin];
      chain_of[i - begin] = c;
      chains[c].push_back(i);
      continue;
    }
    int d = effect_floor;
    for (int p : pr) d = std::max(d, depth[chain_of[p - begin]] + 1);
    if (i > begin) d = std::max(d, depth[chain_of[i - 1 - begin]]);
    if (Barrier(nd)) {
      d = std::max(d, max_depth + 1);
      last_effect = i;
      effect_floor = d + 1;
    }
    chain_of[i - begin] = static_cast<int>(chains.size());
    chains.push_back({i});
    depth.push_back(d);
    max_depth = std::max(max_depth, d);
  }
  s.steps.resize(max_depth + 1);
  for (size_t c = 0; c < chains.size(); ++c) {
    InterOpChain ch;
    ch.nodes = chains[c];
    ch.drop_after.resize(ch.nodes.size());
    for (int i : ch.nodes) ch.cost += EstimateNodeCost(g, g.nodes[i]);
    s.steps[depth[c]].chains.push_back(std::move(ch));
  }
  s.steps.erase(std::remove_if(s.steps.begin(), s.steps.end(), [](const InterOpStep& st) { return st.chains.empty(); }),
                s.steps.end());
  // Heaviest chains first (the parallel run hands them out in this order).
  for (auto& st : s.steps) {
    std::stable_sort(st.chains.begin(), st.chains.end(),
                     [](const InterOpChain& a, const InterOpChain& b) { return a.cost > b.cost; });
  }
  // Drops, in execution order: a value whose readers (its views' readers
  // included) are all in this phase leaves the slot after its last direct
  // reader, the one in the latest step: inside that reader's chain when no
  // other chain of the step reads it, else after the last such chain
  // (sequential) or once the step is done (parallel).
  std::vector<std::tuple<int, int, int>> where(n);  // node -> (step, chain, position)
  for (size_t si = 0; si < s.steps.size(); ++si) {
    for (size_t ci = 0; ci < s.steps[si].chains.size(); ++ci) {
      const auto& nodes = s.steps[si].chains[ci].nodes;
      for (size_t k = 0; k < nodes.size(); ++k) {
        where[nodes[k] - begin] = {static_cast<int>(si), static_cast<int>(ci), static_cast<int>(k)};
      }
    }
    s.steps[si].drop_after_chain.resize(s.steps[si].chains.size());
  }
  std::map<int, std::pair<int, std::vector<std::pair<int, int>>>> last;  // value -> (step, [(chain, position)])
  for (int i = begin; i < end; ++i) {
    const auto [si, ci, pos] = where[i - begin];
    for (int v : g.nodes[i].inputs) {
      if (v < 0 || pinned[v] || g.values[v].kind != ValueKind::kNode || last_use[v] < begin || last_use[v] >= end) {
        continue;
      }
      auto [it, inserted] = last.try_emplace(v, si, std::vector<std::pair<int, int>>{});
      auto& [step, readers] = it->second;
      if (si > step) {
        step = si;
        readers.clear();
      }
      if (si == step) readers.emplace_back(ci, pos);
    }
    // Outputs nothing reads (a saved extra when no backward runs) go at once.
    for (int v : g.nodes[i].outputs) {
      if (v >= 0 && last_use[v] < 0 && !pinned[v]) s.steps[si].chains[ci].drop_after[pos].push_back(v);
    }
  }
  for (const auto& [v, at] : last) {
    const auto& [step, readers] = at;
    InterOpStep& st = s.steps[step];
    int chain = readers[0].first, pos = readers[0].second;
    bool one_chain = true;
    for (auto [c, p] : readers) {
      one_chain = one_chain && c == chain;
      if (c > chain || (c == chain && p > pos)) chain = c, pos = p;
    }
    if (one_chain) {
      st.chains[chain].drop_after[pos].push_back(v);
    } else {
      st.drop_after_chain[chain].push_back(v);
    }
  }
  return s;
}

int InterOpSchedule::candidates() const {
  int c = 0;
  for (const auto& st : steps) c += st.candidate() ? 1 : 0;
  return c;
}

int InterOpSchedule::parallel_steps() const {
  int c = 0;
  for (const auto& st : steps) c += st.candidate() && st.decision == 1 ? 1 : 0;
  return c;
}

int InterOpSchedule::undecided() const {
  int c = 0;
  for (const auto& st : steps) c += st.candidate() && st.decision < 0 ? 1 : 0;
  return c;
}

std::string InterOpSchedule::Summary() const {
  const int cand = candidates(), par = parallel_steps(), und = undecided();
  return fmt::format("{} steps, {} with independent chains: {} parallel, {} sequential{} ({} threads)", steps.size(),
                     cand, par, cand - par - und, und > 0 ? fmt::format(", {} still measured", und) : "", threads);
}

std::string InterOpSchedule::ToText(const Graph& g) const {
  std::string out;
  for (size_t si = 0; si < steps.size(); ++si) {
    if (!steps[si].candidate()) continue;
    out += fmt::format("  step {}:", si);
    for (size_t ci = 0; ci < steps[si].chains.size(); ++ci) {
      out += ci == 0 ? " " : " | ";
      const auto& nodes = steps[si].chains[ci].nodes;
      for (size_t k = 0; k < nodes.size(); ++k) out += (k == 0 ? "" : ">") + g.nodes[nodes[k]].op;
    }
    out += "\n";
  }
  return out;
}

namespace {

void RunChain(const Graph& g, const InterOpChain& ch, std::vector<Tensor>& slot) {
  for (size_t k = 0; k < ch.nodes.size(); ++k) {
    const int i = ch.nodes[k];
    const Node& nd = g.nodes[i];
    std::vector<Tensor> ins;
    ins.reserve(nd.inputs.size());
    for (int v : nd.inputs) ins.push_back(v >= 0 ? slot[v] : Tensor());
    std::vector<Tensor> outs = nd.run(ins);
    TESSERA_CHECK(outs.size() >= nd.outputs.size() || nd.outputs.empty(), "graph node {} ({}): {} outputs, {} expected",
                  i, nd.op, outs.size(), nd.outputs.size());
    for (size_t o = 0; o < nd.outputs.size(); ++o) {
      if (nd.outputs[o] >= 0) slot[nd.outputs[o]] = std::move(outs[o]);
    }
    for (int v : ch.drop_after[k]) slot[v] = Tensor();
  }
}

// The chains one thread each (they are independent: each reads values
// computed before the step and writes its own slots).
void RunParallel(const Graph& g, const InterOpStep& st, std::vector<Tensor>& slot, int threads) {
  const int n = static_cast<int>(st.chains.size());
  std::vector<std::exception_ptr> errors(n);
  std::atomic<int> next{0};
  const ops::Impl impl = ops::CurrentImpl();
  const bool grad = GradEnabled();
#pragma omp parallel num_threads(std::min(threads, n))
  {
    ops::ScopedImpl scoped_impl(impl);
    GradModeGuard grad_mode(grad);
    for (int c = next++; c < n; c = next++) {
      try {
        RunChain(g, st.chains[c], slot);
      } catch (...) {
        errors[c] = std::current_exception();
      }
    }
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace

void RunInterOp(const Graph& g, InterOpSchedule& schedule, std::vector<Tensor>& slot, int force) {
  // Parallel chains only where a node cannot record on the caller's tape
  // (grad mode off: replays run their nodes so) and not inside a team.
  // The thread count is the schedule's, capped by the caller's current
  // OpenMP setting (a rank limited to one thread stays sequential).
  const int threads = std::min(schedule.threads, omp_get_max_threads());
  const bool may_parallel = threads > 1 && !GradEnabled() && !omp_in_parallel();
  for (InterOpStep& st : schedule.steps) {
    int mode = 0;
    if (st.candidate() && may_parallel) {
      if (force >= 0) {
        mode = force;
      } else if (st.decision >= 0) {
        mode = st.decision;
      } else {
        // Alternate, the parallel way first; kTrials of each.
        mode = st.seconds[1].size() <= st.seconds[0].size() ? 1 : 0;
      }
    }
    const bool measuring = force < 0 && st.candidate() && may_parallel && st.decision < 0;
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == 1) {
      RunParallel(g, st, slot, threads);
      for (const auto& drops : st.drop_after_chain) {
        for (int v : drops) slot[v] = Tensor();
      }
    } else {
      for (size_t c = 0; c < st.chains.size(); ++c) {
        RunChain(g, st.chains[c], slot);
        for (int v : st.drop_after_chain[c]) slot[v] = Tensor();
      }
    }
    if (measuring) {
      st.seconds[mode].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (st.seconds[0].size() >= InterOpSchedule::kTrials && st.seconds[1].size() >= InterOpSchedule::kTrials) {
        st.decision = Median(st.seconds[1]) < 0.97 * Median(st.seconds[0]) ? 1 : 0;
      }
    }
  }
}

}  // namespace tessera::graph

// Graph mode's inter-op schedule: chains and steps, effect barriers, the
// values each step drops, split backward nodes, and replays that give the
// same bits run sequentially, run in parallel and measured.
#include "tessera/graph/inter_op.h"

#include <omp.h>

#include <atomic>
#include <stdexcept>

#include <gtest/gtest.h>

#include "tessera/graph/compiled_function.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::Leaf;
using Ins = std::vector<Tensor>;

// ThreadSanitizer cannot see libgomp's barriers (CMakeLists.txt runs it with
// one OpenMP thread); elsewhere the tests use at least two threads so that
// the parallel path runs.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

class ScopedThreads {
 public:
  ScopedThreads() : saved_(omp_get_max_threads()) {
    if (!kTsan) omp_set_num_threads(std::max(saved_, 2));
  }
  ~ScopedThreads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

// Three projections of one normalized input (q, k, v), combined.
struct Qkv {
  Tensor wq = Leaf({24, 16}, 1), wk = Leaf({24, 16}, 2), wv = Leaf({24, 16}, 3), gamma = Leaf({16}, 4);
  std::vector<Tensor> params() const { return {wq, wk, wv, gamma}; }
  Ins operator()(const Ins& in) const {
    Tensor h = RmsNorm(in[0], gamma);
    Tensor q = Gelu(Linear(h, wq, Tensor()));
    Tensor k = Silu(Linear(h, wk, Tensor()));
    Tensor v = Linear(h, wv, Tensor());
    return {Mul(Mul(q, k), v)};
  }
};

std::unique_ptr<CompiledGraph> CompileQkv(const Qkv& m, const Tensor& x) {
  Trace trace;
  Ins out;
  {
    TraceScope scope(trace);
    out = m({x});
  }
  auto g = GraphFromTrace(trace, {x}, out);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return Compile(std::move(g).value(), PassOptions{});
}

TEST(InterOp, IndependentProjectionsFormOneStepOfChains) {
  ScopedThreads threads;
  Qkv m;
  Tensor x = Leaf({8, 16}, 9);
  auto c = CompileQkv(m, x);
  // Forward: RmsNorm, then {Linear>Gelu, Linear>Silu, Linear} side by side.
  bool found = false;
  for (const InterOpStep& st : c->forward_train.steps) {
    if (st.chains.size() != 3) continue;
    found = true;
    for (const InterOpChain& ch : st.chains) EXPECT_EQ(c->graph.nodes[ch.nodes[0]].op, "Linear");
  }
  EXPECT_TRUE(found) << c->forward_train.ToText(c->graph);
  // Backward: each Linear's dx and dW are separate nodes (separable_grad).
  int dx = 0, dw = 0;
  for (const Node& n : c->graph.nodes) {
    if (n.op != "LinearGrad") continue;
    ASSERT_EQ(n.outputs.size(), 1u);
    dx += n.attrs.find("grad_of=in0") != std::string::npos ? 1 : 0;
    dw += n.attrs.find("grad_of=in1") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(dx, 3);
  EXPECT_EQ(dw, 3);
  EXPECT_GE(c->backward.candidates(), 1) << c->backward.ToText(c->graph);
  // The schedule covers every node of its phase exactly once.
  std::vector<int> seen(c->graph.nodes.size(), 0);
  for (const InterOpSchedule* s : {&c->forward_train, &c->backward}) {
    for (const InterOpStep& st : s->steps) {
      for (const InterOpChain& ch : st.chains) {
        for (int i : ch.nodes) seen[i] += 1;
      }
    }
  }
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "node " << i;
}

// Runs the inference forward of `c` with `force` and returns (outputs, slot).
std::pair<Ins, std::vector<Tensor>> RunForward(CompiledGraph& c, const Tensor& x, int force) {
  std::vector<Tensor> slot(c.graph.values.size());
  slot[c.graph.inputs[0]] = x;
  for (const Value& v : c.graph.values) {
    if (v.kind == ValueKind::kParam || v.kind == ValueKind::kConst) slot[v.id] = v.bound;
  }
  NoGradGuard no_grad;
  RunInterOp(c.graph, c.forward_infer, slot, force);
  Ins out;
  for (int v : c.graph.outputs) out.push_back(slot[v]);
  return {out, slot};
}

TEST(InterOp, ParallelAndSequentialGiveTheSameBitsAndDropEveryTemporary) {
  ScopedThreads threads;
  Qkv m;
  Tensor x = Leaf({64, 16}, 10);
  x.set_requires_grad(false);
  auto c = CompileQkv(m, x);
  Tensor ref;
  {
    NoGradGuard no_grad;
    ref = m({x})[0];
  }
  auto [seq, seq_slot] = RunForward(*c, x, 0);
  auto [par, par_slot] = RunForward(*c, x, 1);
  ASSERT_EQ(seq.size(), 1u);
  EXPECT_EQ(seq[0].ToFloatVector(), par[0].ToFloatVector());
  const std::vector<float> a = ref.ToFloatVector(), b = par[0].ToFloatVector();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(a[i])));
  // Only the output is left of what the nodes computed.
  for (const auto* slot : {&seq_slot, &par_slot}) {
    for (const Value& v : c->graph.values) {
      if (v.kind != ValueKind::kNode || v.producer >= c->graph.forward_nodes()) continue;
      const bool is_output = v.id == c->graph.outputs[0];
      EXPECT_EQ((*slot)[v.id].defined(), is_output) << "value %" << v.id;
    }
  }
}

TEST(InterOp, MeasuredReplaysMatchEagerAndDecideEveryStep) {
  ScopedThreads threads;
  Qkv m;
  GraphFunction f("qkv", [&](const Ins& in) { return m(in); });
  const int calls = 2 + 2 * InterOpSchedule::kTrials + 2;
  for (int call = 0; call < calls; ++call) {
    Tensor x = Leaf({32, 16}, 200 + call);
    Tensor xe = x.Clone();
    xe.set_requires_grad(true);
    for (Tensor p : m.params()) p.ZeroGrad();
    Tensor ref = m({xe})[0];
    Backward(Sum(Mul(ref, ref)));
    std::vector<Tensor> ref_grads;
    for (const Tensor& p : m.params()) ref_grads.push_back(p.grad().Clone());
    for (Tensor p : m.params()) p.ZeroGrad();
    Tensor out = f({x})[0];
    Backward(Sum(Mul(out, out)));
    const std::vector<float> a = ref.ToFloatVector(), b = out.ToFloatVector();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(a[i]))) << "call " << call;
    for (size_t p = 0; p < ref_grads.size(); ++p) {
      const std::vector<float> ga = ref_grads[p].ToFloatVector(), gb = m.params()[p].grad().ToFloatVector();
      for (size_t i = 0; i < ga.size(); ++i) {
        ASSERT_NEAR(ga[i], gb[i], 1e-4f * (1 + std::fabs(ga[i]))) << "call " << call << " param " << p;
      }
    }
    const std::vector<float> xa = xe.grad().ToFloatVector(), xb = x.grad().ToFloatVector();
    for (size_t i = 0; i < xa.size(); ++i) ASSERT_NEAR(xa[i], xb[i], 1e-4f * (1 + std::fabs(xa[i])));
  }
  EXPECT_EQ(f.fallback_reason(), "");
  const CompiledGraph* c = f.compiled();
  ASSERT_NE(c, nullptr);
  if (omp_get_max_threads() > 1) {
    EXPECT_EQ(c->forward_train.undecided(), 0) << c->forward_train.Summary();
    EXPECT_EQ(c->backward.undecided(), 0) << c->backward.Summary();
  } else {
    // One thread: nothing to measure, every step sequential.
    EXPECT_EQ(c->forward_train.parallel_steps(), 0);
  }
}

// A hand-built graph over one input x of shape [2]: each node reads x and
// writes one [2] output.
struct HandGraph {
  Graph g;
  int x = -1;
  HandGraph() {
    Value in;
    in.kind = ValueKind::kInput;
    in.shape = {2};
    x = g.AddValue(in);
    g.inputs = {x};
  }
  int Add(const char* op, bool effects, ForwardFn run) {
    Value v;
    v.shape = {2};
    v.producer = static_cast<int>(g.nodes.size());
    const int out = g.AddValue(v);
    Node n;
    n.op = op;
    n.inputs = {x};
    n.outputs = {out};
    n.side_effects = effects;
    n.run = std::move(run);
    g.nodes.push_back(std::move(n));
    g.outputs.push_back(out);
    return out;
  }
  InterOpSchedule Plan() const {
    std::vector<int> last_use(g.values.size(), -1);
    std::vector<bool> pinned(g.values.size(), false);
    for (int v : g.outputs) pinned[v] = true;
    return PlanInterOp(g, 0, static_cast<int>(g.nodes.size()), last_use, pinned, 2);
  }
  std::vector<Tensor> Slot() const {
    std::vector<Tensor> slot(g.values.size());
    slot[x] = Tensor::FromVector(std::vector<float>{1, 2}, {2});
    return slot;
  }
};

Ins Copy(const Ins& ins) { return Ins{ins[0].Clone()}; }

// a, b independent; e has effects; c, d independent.
TEST(InterOp, EffectNodesOrderEverythingAroundThem) {
  ScopedThreads threads;
  HandGraph h;
  for (const char* op : {"A", "B"}) h.Add(op, false, Copy);
  h.Add("E", true, Copy);
  for (const char* op : {"C", "D"}) h.Add(op, false, Copy);
  InterOpSchedule s = h.Plan();
  ASSERT_EQ(s.steps.size(), 3u) << s.ToText(h.g);
  auto ops = [&](const InterOpStep& st) {
    std::string o;
    for (const auto& ch : st.chains) o += h.g.nodes[ch.nodes[0]].op;
    std::sort(o.begin(), o.end());
    return o;
  };
  EXPECT_EQ(ops(s.steps[0]), "AB");
  EXPECT_EQ(ops(s.steps[1]), "E");
  EXPECT_EQ(ops(s.steps[2]), "CD");
  std::vector<Tensor> slot = h.Slot();
  NoGradGuard no_grad;
  RunInterOp(h.g, s, slot, 1);
  for (int v : h.g.outputs) EXPECT_EQ(slot[v].ToFloatVector(), (std::vector<float>{1, 2}));
}

// A node that throws inside a parallel step: the error reaches the caller
// after the other chain finished; nothing hangs.
TEST(InterOp, AnErrorInAParallelChainPropagates) {
  ScopedThreads threads;
  HandGraph h;
  std::atomic<int> ran{0};
  h.Add("Fails", false, [](const Ins&) -> Ins { throw std::runtime_error("node 'Fails' broke"); });
  h.Add("Works", false, [&ran](const Ins& ins) {
    ran += 1;
    return Copy(ins);
  });
  InterOpSchedule s = h.Plan();
  ASSERT_EQ(s.steps.size(), 1u);
  for (int force : {0, 1}) {
    std::vector<Tensor> slot = h.Slot();
    NoGradGuard no_grad;
    try {
      RunInterOp(h.g, s, slot, force);
      ADD_FAILURE() << "no error (force " << force << ")";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'Fails' broke"), std::string::npos);
    }
  }
  // In parallel the other chain ran (sequentially the step stops at the
  // failing one, which runs first: equal costs keep graph order).
  if (omp_get_max_threads() > 1) {
    EXPECT_GE(ran.load(), 1);
  }
}

TEST(InterOp, AGemmCostsMoreThanAView) {
  Qkv m;
  auto c = CompileQkv(m, Leaf({8, 16}, 9));
  double linear = 0, norm = 0;
  for (const Node& n : c->graph.nodes) {
    if (n.op == "Linear") linear = EstimateNodeCost(c->graph, n);
    if (n.op == "RmsNorm") norm = EstimateNodeCost(c->graph, n);
  }
  EXPECT_GT(linear, norm);
}

}  // namespace
}  // namespace tessera::graph

// Graph mode: capture, passes, replay with the eager tape's results, graph
// breaks, and the memory plan.
#include "tessera/graph/compiled_function.h"

#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/graph/functional.h"
#include "tessera/graph/functional_cnn.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::Leaf;
using Ins = std::vector<Tensor>;

Tensor Input(const Shape& shape, uint64_t seed) {
  Tensor t = Leaf(shape, seed);
  t.set_requires_grad(false);
  return t;
}

// A small residual MLP block with a loss: Linear, Gelu, Linear + residual,
// RmsNorm, a tied head and cross-entropy.
struct Mlp {
  Tensor w1 = Leaf({32, 16}, 11), b1 = Leaf({32}, 12), w2 = Leaf({16, 32}, 13), gamma = Leaf({16}, 14);
  std::vector<Tensor> params() const { return {w1, b1, w2, gamma}; }
  Ins operator()(const Ins& in) const {
    Tensor h = Gelu(Linear(in[0], w1, b1));
    Tensor y = Add(Linear(h, w2, Tensor()), in[0]);
    Tensor n = RmsNorm(y, gamma);
    Tensor logits = MatMul(n, w2, false, false);  // [.., 32]
    Tensor loss = CrossEntropy(logits, in[1]);
    return {Scale(loss, 0.5f), y};
  }
};

Tensor Targets(int64_t n, uint64_t seed) {
  std::vector<int64_t> t(n);
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int64_t>((i * 7 + seed) % 32);
  return Tensor::FromInts(t, {n});
}

void ExpectNear(const Tensor& a, const Tensor& b, float tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  std::vector<float> x = a.ToFloatVector(), y = b.ToFloatVector();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::fabs(x[i]))) << what << " @" << i;
}

TEST(GraphMode, ReplayMatchesEagerValuesAndGradients) {
  Mlp mlp;
  GraphOptions options;
  options.passes.recompute_budget_bytes = 0;  // recompute every cheap activation
  GraphFunction f(
      "mlp", [&](const Ins& in) { return mlp(in); }, options);
  for (int call = 0; call < 5; ++call) {
    Tensor x = Leaf({6, 16}, 100 + call);  // requires grad: the input gradient flows too
    Tensor t = Targets(6, call);
    // Eager reference on copies of the same inputs.
    Tensor xe = x.Clone();
    xe.set_requires_grad(true);
    for (Tensor p : mlp.params()) p.ZeroGrad();
    Ins ref = mlp({xe, t});
    Backward(ref[0]);
    std::vector<Tensor> ref_grads;
    for (const Tensor& p : mlp.params()) ref_grads.push_back(p.grad().Clone());
    for (Tensor p : mlp.params()) p.ZeroGrad();

    Ins out = f({x, t});
    Backward(out[0]);
    ExpectNear(ref[0], out[0], 1e-6f, "loss");
    ExpectNear(ref[1], out[1], 1e-6f, "y");
    for (size_t p = 0; p < ref_grads.size(); ++p) ExpectNear(ref_grads[p], mlp.params()[p].grad(), 1e-5f, "grad");
    ExpectNear(xe.grad(), x.grad(), 1e-5f, "input grad");
  }
  EXPECT_EQ(f.fallback_reason(), "");
  EXPECT_EQ(f.replays(), 3);  // calls 3..5
  ASSERT_NE(f.compiled(), nullptr);
  const CompiledGraph& c = *f.compiled();
  // Linear + residual Add fused into one GEMM epilogue; Gelu joined its Linear.
  EXPECT_GE(c.report.fused_groups, 1) << c.graph.ToText();
  EXPECT_NE(c.graph.ToText().find("Fused_Linear_Add"), std::string::npos) << c.graph.ToText();
  // The plan is valid, within 10 % of the lower bound; the graph keeps less than the tape.
  EXPECT_LE(c.plan.arena_bytes, c.plan.peak_live_bytes * 11 / 10);
  EXPECT_LT(c.graph_saved_bytes, c.eager_saved_bytes);
  // The recompute planner moved the cheap norm into the backward (values above
  // match eager with it), and keeps less than without it.
  EXPECT_GE(c.report.recomputed, 1) << c.graph.ToText();
  EXPECT_LT(c.report.kept_after_recompute_bytes, c.report.kept_before_recompute_bytes);
}

TEST(GraphMode, RecomputeBudgetStopsOnceMet) {
  Mlp mlp;
  Tensor x = Leaf({6, 16}, 7), t = Targets(6, 1);
  Trace trace;
  Ins out;
  {
    TraceScope scope(trace);
    out = mlp({x, t});
  }
  ClearTape();
  for (int64_t budget : {int64_t{-1}, int64_t{1} << 40, int64_t{0}}) {
    StatusOr<Graph> g = GraphFromTrace(trace, {x, t}, out);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    PassOptions options;
    options.recompute_budget_bytes = budget;
    std::unique_ptr<CompiledGraph> c = Compile(std::move(g).value(), options);
    if (budget != 0) {
      EXPECT_EQ(c->report.recomputed, 0) << budget;  // off, or already under the budget
    } else {
      EXPECT_GE(c->report.recomputed, 1);
    }
  }
}

TEST(GraphMode, InferenceReplayUnderNoGrad) {
  Mlp mlp;
  GraphFunction f("mlp", [&](const Ins& in) { return mlp(in); });
  NoGradGuard no_grad;
  for (int call = 0; call < 4; ++call) {
    Tensor x = Input({3, 16}, 200 + call), t = Targets(3, call);
    Ins ref = mlp({x, t});
    Ins out = f({x, t});
    ExpectNear(ref[0], out[0], 1e-6f, "loss");
    EXPECT_FALSE(out[0].requires_grad());
  }
  EXPECT_EQ(f.replays(), 2);
}

TEST(GraphMode, HostReadIsAGraphBreak) {
  Tensor w = Leaf({4}, 1);
  GraphFunction f("data-dependent", [&](const Ins& in) {
    Tensor s = Sum(Mul(in[0], w));
    return Ins{s.Item() > 0 ? Scale(s, 2.0f) : Scale(s, -1.0f)};
  });
  for (int call = 0; call < 3; ++call) {
    Tensor x = Input({4}, 300 + call);
    Tensor out = f({x})[0];
    Tensor s = Sum(Mul(x, w));
    EXPECT_FLOAT_EQ(out.Item(), s.Item() > 0 ? 2 * s.Item() : -s.Item());
  }
  EXPECT_NE(f.fallback_reason().find("host read"), std::string::npos) << f.fallback_reason();
  EXPECT_EQ(f.replays(), 0);
}

// A host read inside an operator's own forward function (its kernel reading
// its inputs) is not a graph break; the same read in the traced function is.
TEST(GraphMode, AKernelsOwnHostReadIsNoBreak) {
  Tensor w = Leaf({4}, 1);
  GraphFunction f("kernel-read", [&](const Ins& in) {
    Tensor y = Apply1(
        {"HostSum", OpKind::kOpaque, ""}, {Mul(in[0], w)},
        [](const Ins& xs) {
          float s = 0;
          for (float v : xs[0].ToFloatVector()) s += v;
          return Ins{Tensor::Full({1}, s)};
        },
        [](const std::vector<Tensor>& g, const Ins& xs, const Ins&, const std::vector<bool>&) {
          return std::vector<Tensor>{Tensor::Full(xs[0].shape(), g[0].ToFloatVector()[0])};
        });
    return Ins{Scale(y, 3.0f)};
  });
  for (int call = 0; call < 4; ++call) {
    Tensor x = Input({4}, 310 + call);
    const float want = 3.0f * Sum(Mul(x, w)).Item();
    EXPECT_NEAR(f({x})[0].Item(), want, 1e-5f * (1 + std::fabs(want)));
  }
  EXPECT_EQ(f.fallback_reason(), "");
  EXPECT_EQ(f.replays(), 2);
}

// Batch norm's running statistics, updated in place by an operator with
// effects: the second call's check runs the function twice (eager and the
// graph), and restores them, so every call updates them exactly once.
TEST(GraphMode, TheCheckCallUpdatesRunningStatisticsOnce) {
  Tensor gamma = Leaf({3}, 5), beta = Leaf({3}, 6);
  Tensor graph_mean = Tensor::Zeros({3}), graph_var = Tensor::Full({3}, 1.0);
  Tensor eager_mean = Tensor::Zeros({3}), eager_var = Tensor::Full({3}, 1.0);
  ops::BatchNormOptions bn;
  GraphFunction f("bn",
                  [&](const Ins& in) { return Ins{Sum(graph::BatchNorm2d(in[0], gamma, beta, graph_mean, graph_var, bn))}; });
  for (int call = 0; call < 4; ++call) {
    Tensor x = Input({2, 3, 2, 2}, 320 + call);
    Tensor ref = Sum(graph::BatchNorm2d(x, gamma, beta, eager_mean, eager_var, bn));
    Tensor out = f({x})[0];
    EXPECT_NEAR(out.Item(), ref.Item(), 1e-4f);
    ExpectNear(eager_mean, graph_mean, 1e-6f, "running mean after call " + std::to_string(call + 1));
    ExpectNear(eager_var, graph_var, 1e-6f, "running var after call " + std::to_string(call + 1));
  }
  EXPECT_EQ(f.fallback_reason(), "");
  EXPECT_EQ(f.replays(), 2);
}

TEST(GraphMode, VerificationCatchesAStaleConstant) {
  // A tensor made from the input by a raw Tensor method (not a graph::
  // function) is a constant to the trace: the second call's check sees the
  // graph differ from eager and falls back.
  GraphFunction f("stale", [&](const Ins& in) { return Ins{Add(Affine(in[0], 2.0f), in[0].Clone())}; });
  for (int call = 0; call < 3; ++call) {
    Tensor x = Input({5}, 400 + call);
    ExpectNear(Affine(x, 3.0f), f({x})[0], 1e-6f, "stale");
  }
  EXPECT_NE(f.fallback_reason().find("differs from eager"), std::string::npos) << f.fallback_reason();
  EXPECT_EQ(f.replays(), 0);
}

TEST(GraphMode, AFailedCaptureIsRetried) {
  // Bad input on the first call throws the operator's error and leaves no
  // half-built graph behind; the next good call captures and replays.
  Tensor w = Leaf({4, 4}, 3);
  GraphFunction f("retry", [&](const Ins& in) { return Ins{MatMul(in[0], w)}; });
  EXPECT_THROW(f({Input({4, 3}, 1)}), OpError);  // 4x3 @ 4x4: shapes do not match
  for (int call = 0; call < 4; ++call) {
    Tensor x = Input({2, 4}, 600 + call);
    ExpectNear(MatMul(x, w), f({x})[0], 1e-6f, "retry");
  }
  EXPECT_EQ(f.replays(), 2);
  EXPECT_EQ(f.fallback_reason(), "");
}

TEST(GraphPasses, DeadCodeCseFoldingAndFusion) {
  Tensor w = Leaf({8}, 2);
  Tensor c = Input({8}, 3);  // a constant to the trace
  auto fn = [&](const Ins& in) {
    Tensor unused = Mul(in[0], Scale(w, 3.0f));  // dead
    (void)unused;
    Tensor a = Mul(in[0], w);
    Tensor b = Mul(in[0], w);              // common subexpression of a
    Tensor k = Affine(Scale(c, 2.0f), 1);  // constant-folded
    Tensor chain = Gelu(Affine(Add(a, b), 0.5f, 0.1f));
    return Ins{Sum(Mul(chain, k))};
  };
  Trace trace;
  Tensor x = Input({8}, 4);
  Ins out;
  {
    TraceScope scope(trace);
    out = fn({x});
  }
  StatusOr<Graph> g = GraphFromTrace(trace, {x}, out);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::unique_ptr<CompiledGraph> cg = Compile(std::move(g).value(), {});
  const PassReport& r = cg->report;
  EXPECT_GE(r.removed_dead, 2) << cg->graph.ToText();  // Scale(w) and the unused Mul
  EXPECT_EQ(r.folded, 2) << cg->graph.ToText();        // Scale(c), Affine
  EXPECT_GE(r.merged_common, 1) << cg->graph.ToText();
  EXPECT_GE(r.fused_groups, 1) << cg->graph.ToText();
  EXPECT_LT(cg->graph.nodes.size(), cg->unoptimized.nodes.size());
  // Same value as eager after all the passes.
  GraphFunction f("passes", fn);
  for (int call = 0; call < 4; ++call) {
    Tensor xi = Input({8}, 500 + call);
    ExpectNear(fn({xi})[0], f({xi})[0], 1e-6f, "passes");
  }
  EXPECT_EQ(f.replays(), 2);
  EXPECT_NE(cg->graph.ToDot().find("digraph"), std::string::npos);
}

}  // namespace
}  // namespace tessera::graph

// ExpertParallelMoe on 1, 2 and 4 thread ranks against models::MoeFfn: each
// rank routes its own tokens; its output, aux loss, routing and input
// gradient equal MoeFfn::Forward of the same tokens, and the gradients of
// the experts it holds equal the full layer's gradients summed over every
// rank's tokens (the router's: each rank its own, summed here over ep).
// Covers top-2 and top-1, capacity dropping, a skewed router that leaves
// ranks without tokens, bf16 and fp16 activations, and the E % ep error.
#include "tessera/parallel/expert_parallel/moe.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>

#include "tessera/base/error.h"
#include "tessera/parallel/expert_parallel/token_dispatch.h"
#include "tessera/parallel/tensor_parallel/tp_test_util.h"

namespace tessera::parallel {
namespace {

using testing::ExpectClose;
using testing::LeafCopy;
using testing::Project;
using testing::RandomLeaf;
using testing::RunRanks;

enum class Case { kTop2, kTop2Capacity, kTop1Capacity, kSkewed, kTop2Bf16, kTop2F16 };

models::GptConfig MoeConfig(Case c) {
  models::GptConfig config;
  config.d_model = 16;
  config.n_heads = 2;
  config.n_layers = 2;
  config.activation = models::ActivationKind::kSwiGlu;
  config.bias = c == Case::kTop2;
  config.init_std = 0.3f;
  config.moe.num_experts = 8;
  config.moe.top_k = c == Case::kTop1Capacity ? 1 : 2;
  config.moe.normalize_top_k = c != Case::kTop1Capacity;
  config.moe.d_ff_expert = 24;
  config.moe.capacity_factor = c == Case::kTop2Capacity ? 0.75 : c == Case::kTop1Capacity ? 1.0 : 0.0;
  config.compute_dtype = c == Case::kTop2Bf16 ? DType::kBF16 : c == Case::kTop2F16 ? DType::kF16 : DType::kF32;
  return config;
}

constexpr int64_t kB = 2, kT = 6;
constexpr float kAuxWeight = 0.5f;

struct RankReference {
  Tensor y, aux, x_grad;
  models::MoeRouting routing;
};

std::string CaseName(const std::tuple<int, Case>& param) {
  static const char* kNames[] = {"top2", "top2_capacity", "top1_capacity", "skewed", "top2_bf16", "top2_fp16"};
  return "ep" + std::to_string(std::get<0>(param)) + "_" + kNames[static_cast<int>(std::get<1>(param))];
}

// Runs the comparison; `input_needs_grad` false feeds constant inputs (only
// parameters need gradients; the exchanges must still run in backward).
void ExpectMatchesMoeFfn(int ep, Case kase, bool input_needs_grad) {
  const models::GptConfig config = MoeConfig(kase);
  const DType dtype = config.compute_dtype;
  models::MoeFfn full(config);
  full.InitParameters(5);
  if (kase == Case::kSkewed) {
    // Every token prefers experts 0 and 1 (rank 0's when ep > 1).
    Tensor w = full.router().weight();
    Tensor rows = w.Slice(0, 0, 2);
    rows.Fill(0.0);
    Tensor rest = w.Slice(0, 2, 8);
    rest.Fill(-1.0);
  }
  // Skewed: positive inputs, so every token picks experts 0 and 1 (logit 0 > -Σx).
  auto input = [&](int r) {
    Tensor x = RandomLeaf({kB, kT, config.d_model}, 100 + r, dtype);
    if (kase == Case::kSkewed) x = graph::Detach(graph::Affine(x, 0.5f, 0.5f));
    return x;
  };
  auto upstream = [&](int r) { return RandomLeaf({kB, kT, config.d_model}, 200 + r); };
  auto loss_of = [&](const models::MoeOutput& out, int r) {
    return graph::Add(graph::Cast(Project(out.y, upstream(r)), DType::kF32), graph::Scale(out.aux_loss, kAuxWeight));
  };
  std::vector<RankReference> refs(ep);
  auto rank_input = [&](int r) { return input_needs_grad ? LeafCopy(input(r)) : graph::Detach(input(r)); };
  for (int r = 0; r < ep; ++r) {
    Tensor x = rank_input(r);
    models::MoeOutput out = full.Forward(x);
    graph::Backward(loss_of(out, r));
    refs[r] = {out.y, out.aux_loss, x.grad(), full.last_routing()};
  }
  std::map<std::string, Tensor> ref_grads;  // summed over the ranks' tokens
  for (auto& [name, t] : full.NamedParameters()) ref_grads[name] = t.grad();
  if (kase == Case::kSkewed) {
    EXPECT_EQ(refs[0].routing.tokens_per_expert[2], 0);
    EXPECT_FALSE(ref_grads.at("experts.7.w_up.weight").defined());
  }
  if (kase == Case::kTop2Capacity || kase == Case::kTop1Capacity) {
    EXPECT_GT(refs[0].routing.dropped, 0);
  }

  const double tol = testing::Tolerance(dtype);
  RunRanks(ep, [&](int r, comm::Communicator& c) {
    ExpertParallelMoe moe(full, config, &c);
    ASSERT_EQ(moe.num_local_experts(), 8 / ep);
    ASSERT_EQ(moe.first_expert(), r * 8 / ep);
    Tensor x = rank_input(r);
    models::MoeOutput out = moe.Forward(x);
    const RankReference& ref = refs[r];
    ExpectClose(out.y, ref.y, tol, "y");
    if (kase == Case::kSkewed && r > 0) {
      EXPECT_EQ(moe.last_received_rows(), 0);  // this rank's experts get nothing, yet it joins both exchanges
    }
    ExpectClose(out.aux_loss, ref.aux, 1e-6, "aux");
    EXPECT_EQ(moe.last_routing().expert_indices, ref.routing.expert_indices);
    EXPECT_EQ(moe.last_routing().tokens_per_expert, ref.routing.tokens_per_expert);
    EXPECT_EQ(moe.last_routing().dropped, ref.routing.dropped);
    EXPECT_EQ(moe.last_routing().capacity, ref.routing.capacity);
    graph::Backward(loss_of(out, r));
    if (input_needs_grad) ExpectClose(x.grad(), ref.x_grad, tol, "x.grad");

    AllReduceGradients({moe.router().weight()}, &c);
    size_t checked = 0;
    for (auto& [name, t] : moe.NamedParameters()) {
      const Tensor& want = ref_grads.at(name);
      ++checked;
      if (!want.defined()) {
        EXPECT_FALSE(t.grad().defined()) << name << ": the expert got no tokens, yet has a gradient";
        continue;
      }
      ExpectClose(t.grad(), want, tol, name + ".grad");
    }
    EXPECT_EQ(checked, 1 + moe.local_experts().size() * full.experts()[0].NamedParameters().size());
  });
}

class EpMoe : public ::testing::TestWithParam<std::tuple<int, Case>> {};

TEST_P(EpMoe, MatchesMoeFfnOnEveryRanksTokens) {
  ExpectMatchesMoeFfn(std::get<0>(GetParam()), std::get<1>(GetParam()), /*input_needs_grad=*/true);
}

TEST(EpMoeConstantInput, RanksWithoutRowsStillJoinTheBackwardExchanges) {
  for (int ep : {2, 4}) {
    SCOPED_TRACE("ep " + std::to_string(ep));
    ExpectMatchesMoeFfn(ep, Case::kSkewed, /*input_needs_grad=*/false);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpMoe,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(Case::kTop2, Case::kTop2Capacity, Case::kTop1Capacity,
                                                              Case::kSkewed, Case::kTop2Bf16, Case::kTop2F16)),
                         [](const auto& info) { return CaseName(info.param); });

TEST(EpMoeErrors, ExpertsNotDivisibleByEp) {
  models::GptConfig config = MoeConfig(Case::kTop2);
  config.moe.num_experts = 6;
  models::MoeFfn full(config);
  RunRanks(4, [&](int, comm::Communicator& c) {
    testing::ExpectOpError([&] { ExpertParallelMoe bad(full, config, &c); },
                           "ExpertParallelMoe: num_experts = 6 is not divisible by ep = 4");
  });
}

// DispatchTokens / CombineTokens: out[t] = Σ_j w[t,j] · 2 x[t] over the
// kept choices, so d loss / d x[t] = 2 (Σ_j w[t,j]) R[t] and
// d loss / d w[t,j] = <R[t], 2 x[t]> (0 for a dropped choice).
TEST(EpTokenDispatch, GradientsReachTokensAndGates) {
  RunRanks(3, [&](int r, comm::Communicator& c) {
    const int64_t n = 5, d = 4;
    const int k = 2;
    auto buf = comm::moe::MoeBuffer::Create(&c, 3, d);
    ASSERT_TRUE(buf.ok());
    std::vector<int64_t> idx;
    for (int64_t t = 0; t < n; ++t) {
      idx.push_back((t + r) % 3);
      idx.push_back(t == 2 ? -1 : (t + r + 1) % 3);  // token 2 keeps one choice
    }
    Tensor x = RandomLeaf({n, d}, 300 + r);
    Tensor gates = RandomLeaf({n, k}, 400 + r);
    Tensor weight = RandomLeaf({n, d}, 500 + r);
    DispatchedTokens sent = DispatchTokens(**buf, x, idx, gates, comm::moe::Payload::kFloat32);
    Tensor out = CombineTokens(**buf, sent, graph::Affine(sent.rows, 2.0f), sent.weights);
    graph::Backward(graph::Sum(graph::Mul(out, graph::Detach(weight))));
    const auto xv = x.ToFloatVector(), gv = gates.ToFloatVector(), rv = weight.ToFloatVector();
    const auto gx = x.grad().ToFloatVector(), gg = gates.grad().ToFloatVector(), ov = out.ToFloatVector();
    for (int64_t t = 0; t < n; ++t) {
      double wsum = 0, dot = 0;
      for (int j = 0; j < k; ++j) wsum += idx[t * k + j] >= 0 ? gv[t * k + j] : 0.0;
      for (int64_t i = 0; i < d; ++i) dot += 2.0 * xv[t * d + i] * rv[t * d + i];
      for (int64_t i = 0; i < d; ++i) {
        EXPECT_NEAR(ov[t * d + i], 2 * wsum * xv[t * d + i], 1e-5);
        EXPECT_NEAR(gx[t * d + i], 2 * wsum * rv[t * d + i], 1e-5) << "token " << t;
      }
      for (int j = 0; j < k; ++j) {
        EXPECT_NEAR(gg[t * k + j], idx[t * k + j] >= 0 ? dot : 0.0, 1e-5) << "token " << t << " choice " << j;
      }
    }
  });
}

}  // namespace
}  // namespace tessera::parallel

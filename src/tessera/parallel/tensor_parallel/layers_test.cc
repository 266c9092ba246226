// Column/row-parallel linear, vocabulary-parallel embedding, cross-entropy
// and LM head on 1, 2 and 4 thread ranks (fp32, and bf16 activations with
// fp32 parameters), with and without sequence parallelism: outputs, input
// gradients and the (sharded) parameter gradients equal the full layer's.
#include "tessera/parallel/tensor_parallel/layers.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "tessera/base/error.h"
#include "tessera/parallel/tensor_parallel/tp_test_util.h"

namespace tessera::parallel {
namespace {

using testing::ExpectClose;
using testing::ExpectOpError;
using testing::LeafCopy;
using testing::Project;
using testing::RandomLeaf;
using testing::RunRanks;
using testing::Shard;

constexpr int64_t kB = 2, kT = 8;

// A full layer with random (non-zero) biases.
void RandomizeBias(const Tensor& bias, uint64_t seed) {
  Tensor b = bias;
  FillUniform(b, seed, -0.5f, 0.5f);
}

struct Reference {
  Tensor y, x_grad, w_grad, b_grad;
};

Reference RunFull(graph::nn::Linear& full, const Tensor& x_value, const Tensor& w_out) {
  full.ZeroGrad();
  Tensor x = LeafCopy(x_value);
  Tensor y = full.Forward(x);
  graph::Backward(Project(y, w_out));
  return {y, x.grad(), full.weight().grad(), full.bias().grad()};
}

// (tp, sequence_parallel, activation dtype)
class TpLayers : public ::testing::TestWithParam<std::tuple<int, bool, DType>> {
 protected:
  int tp() const { return std::get<0>(GetParam()); }
  bool sp() const { return std::get<1>(GetParam()); }
  DType dtype() const { return std::get<2>(GetParam()); }
  double tol() const { return testing::Tolerance(dtype()); }
};

TEST_P(TpLayers, ColumnParallelLinear) {
  const int p = tp();
  graph::nn::Linear full(12, 16, /*bias=*/true, 0.2f);
  full.InitParameters(7);
  RandomizeBias(full.bias(), 8);
  const Tensor x = RandomLeaf({kB, kT, 12}, 1, dtype());
  for (bool gather : {false, true}) {
    SCOPED_TRACE(gather ? "gather_output" : "sharded output");
    const Tensor w_out = RandomLeaf({kB, kT, 16}, 2);
    const Reference ref = RunFull(full, x, w_out);
    RunRanks(p, [&](int r, comm::Communicator& c) {
      ColumnParallelLinear layer(full, &c, gather, sp());
      ASSERT_EQ(layer.weight().size(0), 16 / p);
      Tensor xr = LeafCopy(sp() ? Shard(x, 1, r, p) : x);
      Tensor y = layer.Forward(xr);
      const Tensor w_mine = gather ? w_out : Shard(w_out, -1, r, p);
      ExpectClose(y, gather ? ref.y : Shard(ref.y, -1, r, p), tol(), "y");
      graph::Backward(Project(y, w_mine));
      ExpectClose(xr.grad(), sp() ? Shard(ref.x_grad, 1, r, p) : ref.x_grad, tol(), "x.grad");
      ExpectClose(layer.weight().grad(), Shard(ref.w_grad, 0, r, p), tol(), "weight.grad");
      ExpectClose(layer.bias().grad(), Shard(ref.b_grad, 0, r, p), tol(), "bias.grad");
    });
  }
}

TEST_P(TpLayers, RowParallelLinear) {
  const int p = tp();
  graph::nn::Linear full(16, 12, /*bias=*/true, 0.2f);
  full.InitParameters(9);
  RandomizeBias(full.bias(), 10);
  const Tensor x = RandomLeaf({kB, kT, 16}, 3, dtype());
  const Tensor w_out = RandomLeaf({kB, kT, 12}, 4);
  const Reference ref = RunFull(full, x, w_out);
  for (bool parallel_input : {true, false}) {
    SCOPED_TRACE(parallel_input ? "input_is_parallel" : "full input");
    RunRanks(p, [&](int r, comm::Communicator& c) {
      RowParallelLinear layer(full, &c, parallel_input, sp());
      ASSERT_EQ(layer.weight().size(1), 16 / p);
      Tensor xr = LeafCopy(parallel_input ? Shard(x, -1, r, p) : x);
      Tensor y = layer.Forward(xr);
      ExpectClose(y, sp() ? Shard(ref.y, 1, r, p) : ref.y, tol(), "y");
      graph::Backward(Project(y, sp() ? Shard(w_out, 1, r, p) : w_out));
      ExpectClose(xr.grad(), parallel_input ? Shard(ref.x_grad, -1, r, p) : ref.x_grad, tol(), "x.grad");
      ExpectClose(layer.weight().grad(), Shard(ref.w_grad, 1, r, p), tol(), "weight.grad");
      EXPECT_EQ(layer.PartialGradParameters().size(), sp() && p > 1 ? 1u : 0u);
      AllReduceGradients(layer.PartialGradParameters(), &c);
      ExpectClose(layer.bias().grad(), ref.b_grad, tol(), "bias.grad");
    });
  }
}

TEST_P(TpLayers, VocabParallelEmbedding) {
  const int p = tp();
  graph::nn::Embedding full(32, 8, 0.5f);
  full.InitParameters(11);
  std::vector<int64_t> id_values;
  for (int64_t i = 0; i < kB * kT; ++i) id_values.push_back((i * 13 + 5) % 32);
  const Tensor ids = Tensor::FromInts(id_values, {kB, kT});
  const Tensor w_out = RandomLeaf({kB, kT, 8}, 5);
  full.ZeroGrad();
  Tensor y_ref = full.Forward(ids);
  graph::Backward(Project(y_ref, w_out));
  const Tensor ref_grad = full.weight().grad();
  RunRanks(p, [&](int r, comm::Communicator& c) {
    VocabParallelEmbedding layer(full, &c, sp());
    EXPECT_EQ(layer.vocab_start(), r * 32 / p);
    Tensor y = layer.Forward(ids);
    ExpectClose(y, sp() ? Shard(y_ref, 1, r, p) : y_ref, 1e-6, "y");
    graph::Backward(Project(y, sp() ? Shard(w_out, 1, r, p) : w_out));
    ExpectClose(layer.weight().grad(), Shard(ref_grad, 0, r, p), 1e-5, "weight.grad");
  });
}

TEST_P(TpLayers, VocabParallelCrossEntropyAndTiedLmHead) {
  const int p = tp();
  constexpr int64_t kV = 32, kD = 8;
  const Tensor x = RandomLeaf({kB, kT, kD}, 6, dtype());
  const Tensor emb = RandomLeaf({kV, kD}, 7);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < kB * kT; ++i) t.push_back(i % 5 == 3 ? -100 : (i * 7 + 1) % kV);
  const Tensor targets = Tensor::FromInts(t, {kB, kT});

  // Reference: logits = x · Eᵀ, mean cross-entropy.
  Tensor xf = LeafCopy(x), ef = LeafCopy(emb);
  Tensor logits = graph::MatMul(xf, graph::Cast(ef, x.dtype()), false, true);
  Tensor logits_leaf = LeafCopy(logits);
  Tensor loss_ref = graph::CrossEntropy(logits, targets);
  graph::Backward(loss_ref);
  Tensor loss_direct = graph::CrossEntropy(logits_leaf, targets);
  graph::Backward(loss_direct);

  RunRanks(p, [&](int r, comm::Communicator& c) {
    const int64_t vs = kV / p;
    // The loss alone, from a sharded logits leaf.
    Tensor shard = LeafCopy(Shard(logits_leaf, -1, r, p));
    Tensor loss = VocabParallelCrossEntropy(shard, targets, r * vs, &c);
    ExpectClose(loss, loss_direct, 1e-5, "loss");
    graph::Backward(loss);
    ExpectClose(shard.grad(), Shard(logits_leaf.grad(), -1, r, p), 1e-5, "logits.grad");

    // Tied head + loss end to end.
    Tensor xr = LeafCopy(sp() ? Shard(x, 1, r, p) : x);
    Tensor er = LeafCopy(Shard(emb, 0, r, p));
    Tensor head = VocabParallelLmHead(xr, er, &c, sp());
    ASSERT_EQ(head.size(-1), vs);
    Tensor loss2 = VocabParallelCrossEntropy(head, targets, r * vs, &c);
    ExpectClose(loss2, loss_ref, tol(), "head loss");
    graph::Backward(loss2);
    ExpectClose(xr.grad(), sp() ? Shard(xf.grad(), 1, r, p) : xf.grad(), tol(), "x.grad");
    ExpectClose(er.grad(), Shard(ef.grad(), 0, r, p), tol(), "embedding.grad");
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TpLayers,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool(),
                                            ::testing::Values(DType::kF32, DType::kBF16, DType::kF16)),
                         [](const auto& info) {
                           return "tp" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_sp_" : "_") +
                                  std::string(DTypeName(std::get<2>(info.param)));
                         });

TEST(TpLayersErrors, CrossEntropyIgnoresEverythingGivesZero) {
  RunRanks(2, [&](int r, comm::Communicator& c) {
    Tensor shard = RandomLeaf({4, 8}, 1);
    Tensor loss = VocabParallelCrossEntropy(shard, Tensor::FromInts({-100, -100, -100, -100}, {4}), r * 8, &c);
    EXPECT_EQ(loss.Item(), 0.0);
    graph::Backward(loss);
    ExpectClose(shard.grad(), Tensor::Zeros({4, 8}), 0.0, "grad");
  });
}

TEST(TpLayersErrors, IndivisibleSizesNameTheLayer) {
  graph::nn::Linear col(8, 10, false, 0.1f), row(10, 8, false, 0.1f);
  graph::nn::Embedding emb(30, 4, 0.1f);
  RunRanks(4, [&](int r, comm::Communicator& c) {
    ExpectOpError([&] { ColumnParallelLinear bad(col, &c); },
                  "ColumnParallelLinear: out_features = 10 is not divisible by tp = 4");
    ExpectOpError([&] { RowParallelLinear bad(row, &c); },
                  "RowParallelLinear: in_features = 10 is not divisible by tp = 4");
    ExpectOpError([&] { VocabParallelEmbedding bad(emb, &c); },
                  "VocabParallelEmbedding: vocab_size = 30 is not divisible by tp = 4");
    ExpectOpError(
        [&] { VocabParallelCrossEntropy(RandomLeaf({2, 8}, 1), Tensor::FromInts({1, 40}, {2}), r * 8, &c); },
        "target 40 at 1 outside [0, 32)");
    graph::ClearTape();
  });
}

}  // namespace
}  // namespace tessera::parallel

#include "tessera/graph/checkpoint.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/layers.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::Leaf;
using testing::Project;

// A stack of Linear + Gelu layers with deterministic parameters.
class Mlp : public Module {
 public:
  Mlp(int layers, int64_t dim) {
    for (int i = 0; i < layers; ++i) layers_.Append(std::make_unique<nn::Linear>(dim, dim, true, 0.5f));
    RegisterModule("layers", &layers_);
    InitParameters(7);
  }
  Tensor Layer(int i, const Tensor& x) const { return Gelu(layers_[i].Forward(x)); }
  int size() const { return static_cast<int>(layers_.size()); }

 private:
  nn::ModuleList<nn::Linear> layers_;
};

std::vector<std::vector<float>> Grads(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : tensors) out.push_back(t.grad().ToFloatVector());
  return out;
}

void ExpectSame(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "tensor " << i;
    for (size_t j = 0; j < a[i].size(); ++j) EXPECT_FLOAT_EQ(a[i][j], b[i][j]) << "tensor " << i << " element " << j;
  }
}

TEST(CheckpointTest, SameGradientsAsWithoutCheckpointing) {
  Mlp mlp(4, 8);
  std::vector<Tensor> leaves = mlp.Parameters();
  Tensor x = Leaf({3, 8}, 5);
  leaves.push_back(x);
  auto run = [&](bool checkpoint) {
    mlp.ZeroGrad();
    x.ZeroGrad();
    Tensor h = x;
    for (int i = 0; i < mlp.size(); i += 2) {
      auto two = [&, i](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.Layer(i + 1, mlp.Layer(i, in[0]))}; };
      h = checkpoint ? Checkpoint(two, {h})[0] : two({h})[0];
    }
    Tensor loss = Project(h);
    const float value = static_cast<float>(loss.Item());
    Backward(loss);
    EXPECT_EQ(TapeSize(), 0u);
    return std::make_pair(value, Grads(leaves));
  };
  auto [plain_loss, plain] = run(false);
  auto [ckpt_loss, ckpt] = run(true);
  EXPECT_FLOAT_EQ(plain_loss, ckpt_loss);
  ExpectSame(plain, ckpt);
}

TEST(CheckpointTest, ForwardRecordsOneEntryAndKeepsNoIntermediates) {
  Mlp mlp(3, 4);
  Tensor x = Leaf({2, 4}, 1);
  auto all = [&](const std::vector<Tensor>& in) {
    Tensor h = in[0];
    for (int i = 0; i < mlp.size(); ++i) h = mlp.Layer(i, h);
    return std::vector<Tensor>{h};
  };
  std::vector<Tensor> out = Checkpoint(all, {x});
  EXPECT_EQ(TapeSize(), 1u);
  EXPECT_TRUE(out[0].requires_grad());
  ClearTape();
  {
    NoGradGuard no_grad;
    std::vector<Tensor> eval = Checkpoint(all, {x});
    EXPECT_EQ(TapeSize(), 0u);
    EXPECT_FALSE(eval[0].requires_grad());
  }
}

TEST(CheckpointTest, ParametersGetGradientsWhenNoInputRequiresGrad) {
  Mlp mlp(2, 4);
  Tensor x = Tensor::FromVector({1, -2, 0.5f, 3}, {1, 4});  // data, no grad
  auto fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.Layer(1, mlp.Layer(0, in[0]))}; };
  mlp.ZeroGrad();
  Backward(Project(fn({x})[0]));
  auto plain = Grads(mlp.Parameters());
  mlp.ZeroGrad();
  Backward(Project(Checkpoint(fn, {x})[0]));
  ExpectSame(plain, Grads(mlp.Parameters()));
}

TEST(CheckpointTest, NestedCheckpointsAndSeveralOutputs) {
  Mlp mlp(2, 4);
  Tensor x = Leaf({2, 4}, 3);
  auto inner = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp.Layer(0, in[0])}; };
  auto outer = [&](const std::vector<Tensor>& in) {
    Tensor a = Checkpoint(inner, {in[0]})[0];
    Tensor b = mlp.Layer(1, a);
    return std::vector<Tensor>{a, b, Tensor::FromInts({1, 2}, {2})};
  };
  auto loss_of = [](const std::vector<Tensor>& outs) { return Add(Project(outs[0], 11), Project(outs[1], 12)); };
  std::vector<Tensor> leaves = mlp.Parameters();
  leaves.push_back(x);
  mlp.ZeroGrad();
  x.ZeroGrad();
  {
    auto plain_outer = [&](const std::vector<Tensor>& in) {
      Tensor a = inner({in[0]})[0];
      return std::vector<Tensor>{a, mlp.Layer(1, a)};
    };
    Backward(loss_of(plain_outer({x})));
  }
  auto plain = Grads(leaves);
  mlp.ZeroGrad();
  x.ZeroGrad();
  std::vector<Tensor> outs = Checkpoint(outer, {x});
  EXPECT_FALSE(outs[2].requires_grad());  // integer output: not recorded
  Backward(loss_of(outs));
  ExpectSame(plain, Grads(leaves));
}

TEST(CheckpointTest, IdentityOutputKeepsTheInputALeaf) {
  Tensor x = Leaf({3}, 4);
  std::vector<Tensor> out = Checkpoint([](const std::vector<Tensor>& in) { return in; }, {x});
  Backward(Mul(out[0], out[0]));
  std::vector<float> xs = x.ToFloatVector(), g = x.grad().ToFloatVector();
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_FLOAT_EQ(g[i], 2 * xs[i]);
}

TEST(TapeScopeTest, EachTapeBackpropagatesItsOwnEntries) {
  Tensor w = Leaf({2, 2}, 2);
  Tensor x1 = Tensor::FromVector({1, 2}, {1, 2});
  Tensor x2 = Tensor::FromVector({-3, 4}, {1, 2});
  Tape t1, t2;
  Tensor y1, y2;
  {
    TapeScope s1(t1);
    y1 = MatMul(x1, w);
    {
      TapeScope s2(t2);
      y2 = MatMul(x2, w);
      EXPECT_EQ(&CurrentTape(), &t2);
    }
    EXPECT_EQ(&CurrentTape(), &t1);
  }
  EXPECT_NE(&CurrentTape(), &t1);
  EXPECT_EQ(TapeSize(), 0u);
  EXPECT_EQ(t1.size(), 1u);
  EXPECT_EQ(t2.size(), 1u);
  // Backpropagate the second micro-batch first: order does not matter.
  t2.Backward(y2, Tensor::FromVector({1, 1}, {1, 2}));
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(t1.size(), 1u);
  EXPECT_EQ(w.grad().ToFloatVector(), (std::vector<float>{-3, -3, 4, 4}));
  t1.Backward(y1, Tensor::FromVector({1, 0}, {1, 2}));
  EXPECT_EQ(w.grad().ToFloatVector(), (std::vector<float>{-2, -3, 6, 4}));
}

TEST(TapeScopeTest, TensorFromAnotherTapeIsALeafThatReceivesItsGradient) {
  Tensor w = Leaf({2}, 6);
  Tape producer, consumer;
  Tensor h;
  {
    TapeScope scope(producer);
    h = Mul(w, w);
  }
  Tensor y;
  {
    TapeScope scope(consumer);
    y = Mul(h, Tensor::FromVector({3, 5}, {2}));
  }
  consumer.Backward(y, Tensor::FromVector({1, 1}, {2}));
  EXPECT_EQ(h.grad().ToFloatVector(), (std::vector<float>{3, 5}));
  EXPECT_FALSE(w.grad().defined());
  producer.Backward(h, h.grad());
  std::vector<float> ws = w.ToFloatVector(), g = w.grad().ToFloatVector();
  EXPECT_FLOAT_EQ(g[0], 2 * ws[0] * 3);
  EXPECT_FLOAT_EQ(g[1], 2 * ws[1] * 5);
}

}  // namespace
}  // namespace tessera::graph

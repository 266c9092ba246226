#include "tessera/graph/module.h"

#include <cmath>

#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/layers.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

class Toy : public Module {
 public:
  explicit Toy(bool reversed = false) : proj(3, 4, /*bias=*/true, 0.5f), norm(4) {
    if (reversed) {
      RegisterModule("norm", &norm);
      RegisterModule("proj", &proj);
    } else {
      RegisterModule("proj", &proj);
      RegisterModule("norm", &norm);
    }
    scale = RegisterParameter("scale", Tensor::Empty({2, 2}), ParamInit::Uniform(-1.0f, 1.0f));
  }
  nn::Linear proj;
  nn::LayerNorm norm;
  Tensor scale;
};

class Stack : public Module {
 public:
  Stack() {
    for (int i = 0; i < 2; ++i) layers.Append(std::make_unique<Toy>());
    RegisterModule("layers", &layers);
  }
  nn::ModuleList<Toy> layers;
};

std::vector<std::string> Names(const Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, t] : m.NamedParameters()) out.push_back(name);
  return out;
}

TEST(ModuleTest, DottedNamesInRegistrationOrder) {
  Stack stack;
  EXPECT_EQ(Names(stack), (std::vector<std::string>{"layers.0.scale", "layers.0.proj.weight", "layers.0.proj.bias",
                                                    "layers.0.norm.weight", "layers.0.norm.bias", "layers.1.scale",
                                                    "layers.1.proj.weight", "layers.1.proj.bias",
                                                    "layers.1.norm.weight", "layers.1.norm.bias"}));
  EXPECT_EQ(stack.NumParameters(), 2 * (4 + 12 + 4 + 4 + 4));
  for (const Tensor& p : stack.Parameters()) EXPECT_TRUE(p.requires_grad());
  stack.InitParameters(1);
  EXPECT_EQ(stack.layers[1].proj.weight().name(), "layers.1.proj.weight");
}

TEST(ModuleTest, InitDependsOnNameAndSeedOnly) {
  Toy a(false), b(true);
  a.InitParameters(7);
  b.InitParameters(7);
  EXPECT_EQ(a.proj.weight().ToFloatVector(), b.proj.weight().ToFloatVector());
  EXPECT_EQ(a.scale.ToFloatVector(), b.scale.ToFloatVector());
  EXPECT_EQ(a.norm.gamma().ToFloatVector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(a.proj.bias().ToFloatVector(), std::vector<float>(4, 0.0f));
  Toy c;
  c.InitParameters(8);
  EXPECT_NE(a.proj.weight().ToFloatVector(), c.proj.weight().ToFloatVector());
  // Same seed, different names -> different streams.
  Stack stack;
  stack.InitParameters(7);
  EXPECT_NE(stack.layers[0].proj.weight().ToFloatVector(), stack.layers[1].proj.weight().ToFloatVector());
}

TEST(ModuleTest, NormalInitHasRequestedStd) {
  nn::Linear big(256, 256, false, 0.02f);
  big.InitParameters(3);
  double sum = 0, sq = 0;
  std::vector<float> w = big.weight().ToFloatVector();
  for (float v : w) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = sum / w.size();
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(sq / w.size() - mean * mean), 0.02, 5e-4);
}

TEST(ModuleTest, StateDictRoundTrip) {
  Toy a, b;
  a.InitParameters(1);
  b.InitParameters(2);
  ASSERT_NE(a.proj.weight().ToFloatVector(), b.proj.weight().ToFloatVector());
  std::map<std::string, Tensor> state = a.StateDict();
  EXPECT_EQ(state.size(), 5u);
  EXPECT_EQ(state.at("proj.weight").impl(), a.proj.weight().impl());  // aliases
  std::map<std::string, Tensor> copy;
  for (auto& [k, v] : state) copy.emplace(k, v.Clone());
  ASSERT_TRUE(b.LoadStateDict(copy).ok());
  for (const auto& [name, t] : b.StateDict()) EXPECT_EQ(t.ToFloatVector(), state.at(name).ToFloatVector()) << name;
}

TEST(ModuleTest, LoadStateDictErrorsNameKeysAndShapes) {
  Toy a;
  a.InitParameters(1);
  const std::vector<float> before = a.proj.weight().ToFloatVector();
  auto state = a.StateDict();
  std::map<std::string, Tensor> bad;
  for (auto& [k, v] : state) bad.emplace(k, Tensor::Zeros(v.shape()));
  bad.erase("norm.bias");
  bad["proj.weight"] = Tensor::Zeros({3, 4});
  bad["scale"] = Tensor::Zeros({2, 2}, DType::kBF16);
  bad["head.weight"] = Tensor::Zeros({1});
  Status st = a.LoadStateDict(bad);
  ASSERT_FALSE(st.ok());
  const std::string& msg = st.message();
  EXPECT_NE(msg.find("4 problems"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing key 'norm.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape mismatch for 'proj.weight': checkpoint has [3, 4], model expects [4, 3]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("dtype mismatch for 'scale': checkpoint has bf16, model expects fp32"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("unexpected key 'head.weight'"), std::string::npos) << msg;
  EXPECT_EQ(a.proj.weight().ToFloatVector(), before);  // nothing copied
}

TEST(ModuleTest, ZeroGradAndTrainingMode) {
  Stack stack;
  stack.InitParameters(4);
  Tensor x = Tensor::FromVector({1, 2, 3}, {1, 3});
  Backward(Sum(stack.layers[0].proj.Forward(x)));
  Tensor w = stack.layers[0].proj.weight();
  ASSERT_TRUE(w.grad().defined());
  stack.ZeroGrad(/*set_to_none=*/false);
  ASSERT_TRUE(w.grad().defined());
  for (float g : w.grad().ToFloatVector()) EXPECT_EQ(g, 0.0f);
  stack.ZeroGrad();
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(stack.layers[1].training());
  stack.SetTraining(false);
  EXPECT_FALSE(stack.training());
  EXPECT_FALSE(stack.layers[1].norm.training());
}

class WithBuffers : public Module {
 public:
  WithBuffers() {
    weight = RegisterParameter("weight", Tensor::Empty({3}), ParamInit::Ones());
    stats = RegisterBuffer("stats", Tensor::Empty({3}), ParamInit::Normal(1.0f));
    RegisterModule("child", &child);
  }
  nn::LayerNorm child{2};
  Tensor weight, stats;
};

TEST(ModuleTest, BuffersAreNamedInitializedAndNotTrained) {
  WithBuffers m;
  m.InitParameters(7);
  ASSERT_EQ(m.NamedBuffers().size(), 1u);
  EXPECT_EQ(m.NamedBuffers()[0].first, "stats");
  EXPECT_FALSE(m.stats.requires_grad());
  EXPECT_NE(m.stats.ToFloatVector(), std::vector<float>(3, 0.0f));  // filled by its rule
  WithBuffers again;
  again.InitParameters(7);
  EXPECT_EQ(again.stats.ToFloatVector(), m.stats.ToFloatVector());  // by seed and name only
  EXPECT_EQ(m.StateDict().count("stats"), 0u);                     // parameters only
  for (const auto& [name, p] : m.NamedParameters()) EXPECT_NE(name, "stats");
}

TEST(LayersTest, LinearComputesXWTransposedPlusBias) {
  nn::Linear lin(2, 3, true, 1.0f);
  lin.InitParameters(5);
  Tensor x = Tensor::FromVector({1, 2, -1, 0.5f}, {2, 2});
  std::vector<float> w = lin.weight().ToFloatVector();  // [3, 2]
  Tensor b = lin.bias();
  b.CopyFrom(Tensor::FromVector({0.1f, 0.2f, 0.3f}, {3}));
  std::vector<float> y = lin.Forward(x).ToFloatVector();
  ClearTape();
  const float xs[2][2] = {{1, 2}, {-1, 0.5f}};
  for (int i = 0; i < 2; ++i) {
    for (int o = 0; o < 3; ++o) {
      float expect = xs[i][0] * w[o * 2] + xs[i][1] * w[o * 2 + 1] + 0.1f * (o + 1);
      EXPECT_NEAR(y[i * 3 + o], expect, 1e-5);
    }
  }
}

TEST(LayersTest, MixedPrecisionLinearKeepsFp32Gradients) {
  nn::Linear lin(8, 4, true, 0.1f);
  lin.InitParameters(6);
  Tensor x = Tensor::Full({2, 8}, 0.5, DType::kBF16);
  Tensor y = lin.Forward(x);
  EXPECT_EQ(y.dtype(), DType::kBF16);
  Backward(Sum(Cast(y, DType::kF32)));
  ASSERT_TRUE(lin.weight().grad().defined());
  EXPECT_EQ(lin.weight().grad().dtype(), DType::kF32);
  for (float g : lin.weight().grad().ToFloatVector()) EXPECT_NEAR(g, 1.0f, 1e-2);  // sum over 2 rows of 0.5
  for (float g : lin.bias().grad().ToFloatVector()) EXPECT_NEAR(g, 2.0f, 1e-2);
}

}  // namespace
}  // namespace tessera::graph

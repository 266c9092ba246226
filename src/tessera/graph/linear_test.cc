// graph::Linear: gradients by finite differences, and bitwise the same
// values and gradients as the unfused MatMul + Add it replaces in nn::Linear
// (so models train exactly as before, and as their parallel versions).
#include <gtest/gtest.h>

#include "tessera/graph/functional.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/graph/tape.h"

namespace tessera::graph {
namespace {

using testing::ExpectGradientsMatch;
using testing::Leaf;
using testing::Project;
using Ins = std::vector<Tensor>;

TEST(GradCheckTest, Linear) {
  ExpectGradientsMatch("linear", {Leaf({3, 4}, 1), Leaf({5, 4}, 2), Leaf({5}, 3)},
                       [](const Ins& in) { return Project(Linear(in[0], in[1], in[2])); });
  ExpectGradientsMatch("linear folded", {Leaf({2, 3, 4}, 4), Leaf({5, 4}, 5), Leaf({5}, 6)},
                       [](const Ins& in) { return Project(Linear(in[0], in[1], in[2])); });
  ExpectGradientsMatch("linear without bias", {Leaf({3, 4}, 7), Leaf({5, 4}, 8)},
                       [](const Ins& in) { return Project(Linear(in[0], in[1], Tensor())); });
}

std::vector<float> Bits(const Tensor& t) { return t.ToFloatVector(); }

TEST(LinearTest, SameValuesAndGradientsAsMatMulThenAdd) {
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    Ins fused = {Leaf({2, 7, 33}, 11), Leaf({19, 33}, 12), Leaf({19}, 13)};
    Ins plain = {Leaf({2, 7, 33}, 11), Leaf({19, 33}, 12), Leaf({19}, 13)};
    auto loss = [dt](const Tensor& y) { return Sum(Cast(Mul(y, Cast(Leaf({2, 7, 19}, 14), dt)), DType::kF32)); };
    // One graph at a time: Backward consumes the thread's tape.
    Tensor yf = Linear(Cast(fused[0], dt), Cast(fused[1], dt), Cast(fused[2], dt));
    Backward(loss(yf));
    Tensor yp = Add(MatMul(Cast(plain[0], dt), Cast(plain[1], dt), false, true), Cast(plain[2], dt));
    Backward(loss(yp));
    EXPECT_EQ(Bits(yf), Bits(yp)) << DTypeName(dt);
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_TRUE(fused[i].grad().defined() && plain[i].grad().defined()) << i;
      EXPECT_EQ(Bits(fused[i].grad()), Bits(plain[i].grad())) << DTypeName(dt) << " input " << i;
    }
  }
}

}  // namespace
}  // namespace tessera::graph

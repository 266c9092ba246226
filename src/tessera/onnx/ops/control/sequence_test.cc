// Unit tests of the sequence kernels without node tests: SplitToSequence,
// ConcatFromSequence, SequenceAt / SequenceErase (positions, bad input).
#include <gtest/gtest.h>

#include "tessera/onnx/ops/control/control_util.h"

namespace tessera::onnx::control {
namespace {

Array Iota(std::vector<int64_t> shape) {
  Array a(ElemType::kFloat, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(i);
  return a;
}

Node MakeNode(const std::string& op, std::map<std::string, int64_t> ints) {
  Node n;
  n.op_type = op;
  n.outputs = {"y"};
  for (const auto& [k, v] : ints) {
    Attribute a;
    a.type = Attribute::Type::kInt;
    a.i = v;
    n.attrs[k] = a;
  }
  return n;
}

TEST(ControlSequence, SplitToSequenceSizesAndSqueeze) {
  const Value x = Value::Tensor(Iota({2, 5}));
  const Value split = Value::Tensor(Array::Scalar<int64_t>(2));
  Node n = MakeNode("SplitToSequence", {{"axis", 1}});
  OpContext ctx(n, 17, {&x, &split}, nullptr, nullptr);
  ASSERT_TRUE(SplitToSequenceKernel(ctx).ok());
  const Value& s = ctx.outputs()[0];
  ASSERT_EQ(s.sequence.size(), 3u);
  EXPECT_EQ(s.sequence[2].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s.sequence[1].data<float>()[2], 7.f);  // row 1, columns 2..3

  Node n2 = MakeNode("SplitToSequence", {{"axis", 0}, {"keepdims", 0}});
  OpContext ctx2(n2, 17, {&x}, nullptr, nullptr);
  ASSERT_TRUE(SplitToSequenceKernel(ctx2).ok());
  ASSERT_EQ(ctx2.outputs()[0].sequence.size(), 2u);
  EXPECT_EQ(ctx2.outputs()[0].sequence[1].shape(), (std::vector<int64_t>{5}));
  EXPECT_EQ(ctx2.outputs()[0].sequence[1].data<float>()[0], 5.f);

  const Value bad = Value::Tensor(Array::Vector<int64_t>({2, 2}));  // sums to 4, not 5
  OpContext ctx3(n, 17, {&x, &bad}, nullptr, nullptr);
  EXPECT_FALSE(SplitToSequenceKernel(ctx3).ok());
}

TEST(ControlSequence, ConcatFromSequenceConcatAndStack) {
  const Value s = Value::Sequence({Iota({2, 2}), Iota({2, 2})}, ElemType::kFloat);
  Node n = MakeNode("ConcatFromSequence", {{"axis", -1}});
  OpContext ctx(n, 17, {&s}, nullptr, nullptr);
  ASSERT_TRUE(ConcatFromSequenceKernel(ctx).ok());
  const Array& c = ctx.outputs()[0].tensor;
  EXPECT_EQ(c.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(c.data<float>()[2], 0.f);
  EXPECT_EQ(c.data<float>()[5], 3.f);

  Node n2 = MakeNode("ConcatFromSequence", {{"axis", 2}, {"new_axis", 1}});
  OpContext ctx2(n2, 17, {&s}, nullptr, nullptr);
  ASSERT_TRUE(ConcatFromSequenceKernel(ctx2).ok());
  EXPECT_EQ(ctx2.outputs()[0].tensor.shape(), (std::vector<int64_t>{2, 2, 2}));

  Node n3 = MakeNode("ConcatFromSequence", {{"axis", 3}, {"new_axis", 1}});
  OpContext ctx3(n3, 17, {&s}, nullptr, nullptr);
  EXPECT_FALSE(ConcatFromSequenceKernel(ctx3).ok());
}

TEST(ControlSequence, AtAndErasePositions) {
  const Value s = Value::Sequence({Iota({1}), Iota({2}), Iota({3})}, ElemType::kFloat);
  const Value neg = Value::Tensor(Array::Scalar<int32_t>(-1));
  const Value out = Value::Tensor(Array::Scalar<int64_t>(3));
  Node at = MakeNode("SequenceAt", {});
  OpContext c1(at, 17, {&s, &neg}, nullptr, nullptr);
  ASSERT_TRUE(SequenceAtKernel(c1).ok());
  EXPECT_EQ(c1.outputs()[0].tensor.numel(), 3);
  OpContext c2(at, 17, {&s, &out}, nullptr, nullptr);
  EXPECT_FALSE(SequenceAtKernel(c2).ok());

  Node erase = MakeNode("SequenceErase", {});
  OpContext c3(erase, 17, {&s}, nullptr, nullptr);
  ASSERT_TRUE(SequenceEraseKernel(c3).ok());
  ASSERT_EQ(c3.outputs()[0].sequence.size(), 2u);
  EXPECT_EQ(c3.outputs()[0].sequence[1].numel(), 2);
  const Value not_seq = Value::Tensor(Iota({2}));
  OpContext c4(erase, 17, {&not_seq}, nullptr, nullptr);
  EXPECT_FALSE(SequenceEraseKernel(c4).ok());
}

}  // namespace
}  // namespace tessera::onnx::control

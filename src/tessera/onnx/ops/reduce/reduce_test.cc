// Unit tests of the reduce family's tricky cases: axes by opset, noop,
// integer wrap-around, empty reductions, ties in ArgMax / TopK, Softmax's
// pre-13 coercion, CumSum exclusive / reverse.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tessera/onnx/ops/reduce/kernels.h"

namespace tessera::onnx {
namespace {

Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}
Attribute IntsAttr(std::vector<int64_t> v) {
  Attribute a;
  a.type = Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}

// Runs `kernel` on `inputs` (an undefined Array = absent input); returns the outputs.
std::vector<Array> RunOp(Kernel kernel, const std::string& op, int64_t opset, std::vector<Array> inputs,
                         std::map<std::string, Attribute> attrs = {}, size_t num_outputs = 1) {
  Node node;
  node.op_type = op;
  node.attrs = std::move(attrs);
  std::vector<Value> values;
  for (Array& a : inputs) values.push_back(a.defined() ? Value::Tensor(a) : Value());
  std::vector<const Value*> ptrs;
  for (size_t i = 0; i < values.size(); ++i) {
    node.inputs.push_back(values[i].is_tensor() ? "in" + std::to_string(i) : "");
    ptrs.push_back(values[i].is_tensor() ? &values[i] : nullptr);
  }
  for (size_t i = 0; i < num_outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  OpContext ctx(node, opset, ptrs, nullptr, nullptr);
  Status s = kernel(ctx);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<Array> out;
  if (!s.ok()) return out;
  for (Value& v : ctx.outputs()) out.push_back(v.tensor);
  return out;
}

template <typename T>
std::vector<T> Values(const Array& a) {
  return std::vector<T>(a.data<T>(), a.data<T>() + a.numel());
}

Array Floats(std::vector<float> v, std::vector<int64_t> shape) { return Array::Vector(v).Reshaped(std::move(shape)); }

TEST(OnnxReduce, SumAxesInputFromOpset13) {
  Array x = Floats({1, 2, 3, 4, 5, 6}, {2, 3});
  auto out = RunOp(ReduceSumKernel, "ReduceSum", 13, {x, Array::Vector<int64_t>({-1})}, {{"keepdims", IntAttr(0)}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{6, 15}));
  // Opset 11: axes is an attribute.
  out = RunOp(ReduceSumKernel, "ReduceSum", 11, {x}, {{"axes", IntsAttr({0})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{5, 7, 9}));
  // Empty axes: all, or the input with noop_with_empty_axes.
  out = RunOp(ReduceSumKernel, "ReduceSum", 13, {x, Array::Vector<int64_t>({})});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{21}));
  out = RunOp(ReduceSumKernel, "ReduceSum", 13, {x, Array()}, {{"noop_with_empty_axes", IntAttr(1)}});
  EXPECT_EQ(out[0].shape(), x.shape());
}

TEST(OnnxReduce, NonContiguousAxes) {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  auto out = RunOp(ReduceMaxKernel, "ReduceMax", 13, {Floats(v, {2, 3, 4})}, {{"axes", IntsAttr({0, 2})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{15, 19, 23}));
  out = RunOp(ReduceMeanKernel, "ReduceMean", 13, {Floats(v, {2, 3, 4})},
              {{"axes", IntsAttr({2, 0})}, {"keepdims", IntAttr(0)}});
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{7.5f, 11.5f, 15.5f}));
}

TEST(OnnxReduce, IntegerWrapAndEmpty) {
  Array x = Array::Vector<int32_t>({std::numeric_limits<int32_t>::max(), 1, -3});
  auto out = RunOp(ReduceSumKernel, "ReduceSum", 13, {x}, {{"keepdims", IntAttr(0)}});
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{std::numeric_limits<int32_t>::max() - 2}));
  out = RunOp(ReduceProdKernel, "ReduceProd", 13, {Array::Vector<int8_t>({16, 16, -1})});
  EXPECT_EQ(Values<int8_t>(out[0]), (std::vector<int8_t>{0}));
  out = RunOp(ReduceL1Kernel, "ReduceL1", 13, {Array::Vector<int64_t>({std::numeric_limits<int64_t>::min(), 2})});
  EXPECT_EQ(Values<int64_t>(out[0]), (std::vector<int64_t>{std::numeric_limits<int64_t>::min() + 2}));
  Array empty(ElemType::kFloat, {0, 2});
  out = RunOp(ReduceMaxKernel, "ReduceMax", 13, {empty}, {{"axes", IntsAttr({0})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Values<float>(out[0])[0], -std::numeric_limits<float>::infinity());
  out = RunOp(ReduceMinKernel, "ReduceMin", 13, {Array(ElemType::kInt16, {0})});
  EXPECT_EQ(Values<int16_t>(out[0]), (std::vector<int16_t>{std::numeric_limits<int16_t>::max()}));
  out = RunOp(ReduceProdKernel, "ReduceProd", 13, {empty});
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1}));
  out = RunOp(ReduceLogSumExpKernel, "ReduceLogSumExp", 13, {empty});
  EXPECT_EQ(Values<float>(out[0])[0], -std::numeric_limits<float>::infinity());
  out = RunOp(ReduceL2Kernel, "ReduceL2", 13, {Array::Vector<int32_t>({3, 4})});
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{5}));
}

TEST(OnnxReduce, LogSumExpLarge) {
  auto out = RunOp(ReduceLogSumExpKernel, "ReduceLogSumExp", 13, {Array::Vector<double>({1000, 1000})});
  EXPECT_NEAR(Values<double>(out[0])[0], 1000 + std::log(2.0), 1e-9);
}

TEST(OnnxReduce, ArgMaxSelectLast) {
  Array x = Floats({2, 1, 2, 1}, {1, 4});
  auto out = RunOp(ArgMaxKernel, "ArgMax", 13, {x}, {{"axis", IntAttr(1)}});
  EXPECT_EQ(Values<int64_t>(out[0]), (std::vector<int64_t>{0}));
  out = RunOp(ArgMaxKernel, "ArgMax", 13, {x}, {{"axis", IntAttr(-1)}, {"select_last_index", IntAttr(1)}});
  EXPECT_EQ(Values<int64_t>(out[0]), (std::vector<int64_t>{2}));
  out = RunOp(ArgMinKernel, "ArgMin", 13, {x},
              {{"axis", IntAttr(1)}, {"keepdims", IntAttr(0)}, {"select_last_index", IntAttr(1)}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1}));
  EXPECT_EQ(Values<int64_t>(out[0]), (std::vector<int64_t>{3}));
}

TEST(OnnxReduce, CumSum) {
  Array x = Array::Vector<int32_t>({1, 2, 3, std::numeric_limits<int32_t>::max()});
  Array axis = Array::Scalar<int64_t>(0);
  auto out = RunOp(CumSumKernel, "CumSum", 14, {x, axis});
  EXPECT_EQ(Values<int32_t>(out[0]), (std::vector<int32_t>{1, 3, 6, std::numeric_limits<int32_t>::min() + 5}));
  out = RunOp(CumSumKernel, "CumSum", 14, {Floats({1, 2, 3, 4, 5, 6}, {2, 3}), Array::Scalar<int32_t>(-1)},
              {{"exclusive", IntAttr(1)}, {"reverse", IntAttr(1)}});
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{5, 3, 0, 11, 6, 0}));
}

TEST(OnnxReduce, TopKTiesAndSmallest) {
  Array x = Floats({1, 3, 3, 2, 3, 0}, {1, 6});
  auto out = RunOp(TopKKernel, "TopK", 11, {x, Array::Vector<int64_t>({3})}, {}, 2);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(Values<int64_t>(out[1]), (std::vector<int64_t>{1, 2, 4}));
  out = RunOp(TopKKernel, "TopK", 11, {x, Array::Vector<int64_t>({2})}, {{"largest", IntAttr(0)}}, 2);
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(Values<int64_t>(out[1]), (std::vector<int64_t>{5, 0}));
}

TEST(OnnxReduce, SoftmaxCoercionBefore13) {
  Array x = Floats({0, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2});
  // Opset 11, axis 1: each batch's 4 elements form one row.
  auto out = RunOp(SoftmaxKernel, "Softmax", 11, {x});
  for (float v : Values<float>(out[0])) EXPECT_NEAR(v, 0.25f, 1e-6);
  // Opset 13, axis 1: along the middle axis only.
  out = RunOp(SoftmaxKernel, "Softmax", 13, {x}, {{"axis", IntAttr(1)}});
  for (float v : Values<float>(out[0])) EXPECT_NEAR(v, 0.5f, 1e-6);
  out = RunOp(HardmaxKernel, "Hardmax", 13, {Floats({1, 3, 3, 2}, {1, 4})});
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{0, 1, 0, 0}));
}

}  // namespace
}  // namespace tessera::onnx

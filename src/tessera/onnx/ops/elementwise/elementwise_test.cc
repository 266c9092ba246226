// Unit tests of the elementwise kernels' tricky parts: integer wrapping and
// division by zero, Mod signs, Pow of mixed types, BitShift widths, legacy
// (opset < 7) broadcasting, Clip bounds, Cast to / from strings and halves.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/onnx/op.h"

namespace tessera::onnx {
namespace {

struct RunResult {
  Status status;
  std::vector<Value> outputs;
};

RunResult RunOp(const std::string& op, const std::vector<Array>& inputs, int64_t opset = 17,
                std::map<std::string, Attribute> attrs = {}) {
  Node node;
  node.op_type = op;
  node.name = "n";
  node.attrs = std::move(attrs);
  std::vector<Value> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i].defined() ? "in" + std::to_string(i) : "");
    values.push_back(Value::Tensor(inputs[i]));
  }
  node.outputs = {"out"};
  std::vector<const Value*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) ptrs.push_back(inputs[i].defined() ? &values[i] : nullptr);
  OpContext ctx(node, opset, ptrs, nullptr, nullptr);
  const Kernel* k = OpRegistry::Global().Find("", op);
  EXPECT_NE(k, nullptr) << op;
  RunResult r;
  r.status = (*k)(ctx);
  r.outputs = ctx.outputs();
  return r;
}

Attribute IntAttr(int64_t v) {
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = v;
  return a;
}
Attribute StrAttr(const std::string& s) {
  Attribute a;
  a.type = Attribute::Type::kString;
  a.s = s;
  return a;
}

template <typename T>
std::vector<T> Out(const RunResult& r) {
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  const Array& a = r.outputs.at(0).tensor;
  return std::vector<T>(a.data<T>(), a.data<T>() + a.numel());
}

TEST(Elementwise, IntegerArithmeticWraps) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(Out<int32_t>(RunOp("Add", {Array::Vector<int32_t>({mx}), Array::Vector<int32_t>({1})})),
            std::vector<int32_t>({mn}));
  EXPECT_EQ(Out<int32_t>(RunOp("Neg", {Array::Vector<int32_t>({mn, 5})})), std::vector<int32_t>({mn, -5}));
  EXPECT_EQ(Out<int32_t>(RunOp("Abs", {Array::Vector<int32_t>({mn, -5})})), std::vector<int32_t>({mn, 5}));
  EXPECT_EQ(Out<uint16_t>(RunOp("Mul", {Array::Vector<uint16_t>({65535}), Array::Vector<uint16_t>({65535})})),
            std::vector<uint16_t>({1}));
  EXPECT_EQ(Out<int32_t>(RunOp("Div", {Array::Vector<int32_t>({mn, -7, 7}), Array::Vector<int32_t>({-1, 2, -2})})),
            std::vector<int32_t>({mn, -3, -3}));
  RunResult z = RunOp("Div", {Array::Vector<int32_t>({1}), Array::Vector<int32_t>({0})});
  EXPECT_FALSE(z.status.ok());
  EXPECT_NE(z.status.message().find("division by zero"), std::string::npos) << z.status.ToString();
  EXPECT_FALSE(RunOp("Mod", {Array::Vector<int64_t>({1}), Array::Vector<int64_t>({0})}).status.ok());
  EXPECT_FALSE(RunOp("Add", {Array::Vector<int32_t>({1}), Array::Vector<int64_t>({1})}).status.ok());
}

TEST(Elementwise, ModSigns) {
  auto x = Array::Vector<int32_t>({-4, 7, 5, 4, -7, 8, std::numeric_limits<int32_t>::min()});
  auto y = Array::Vector<int32_t>({3, -3, 8, -3, 3, 5, -1});
  EXPECT_EQ(Out<int32_t>(RunOp("Mod", {x, y})), std::vector<int32_t>({2, -2, 5, -2, 2, 3, 0}));
  EXPECT_EQ(Out<int32_t>(RunOp("Mod", {x, y}, 13, {{"fmod", IntAttr(1)}})),
            std::vector<int32_t>({-1, 1, 5, 1, -1, 3, 0}));
  auto f = Out<float>(
      RunOp("Mod", {Array::Vector<float>({-4.5f}), Array::Vector<float>({2.f})}, 13, {{"fmod", IntAttr(1)}}));
  EXPECT_EQ(f, std::vector<float>({-0.5f}));
  EXPECT_FALSE(RunOp("Mod", {Array::Vector<float>({1.f}), Array::Vector<float>({2.f})}).status.ok());
}

TEST(Elementwise, PowMixedTypes) {
  EXPECT_EQ(Out<int64_t>(RunOp("Pow", {Array::Vector<int64_t>({2, 3, -2, 2}), Array::Vector<float>({3, 2, 3, -1})})),
            std::vector<int64_t>({8, 9, -8, 0}));
  EXPECT_EQ(
      Out<int32_t>(RunOp("Pow", {Array::Vector<int32_t>({2, -1, 1, 5}), Array::Vector<int64_t>({10, -3, -4, 0})})),
      std::vector<int32_t>({1024, -1, 1, 1}));
  EXPECT_EQ(Out<float>(RunOp("Pow", {Array::Vector<float>({2, 4}), Array::Vector<uint64_t>({3, 1})})),
            std::vector<float>({8, 4}));
}

TEST(Elementwise, BitShiftWidths) {
  std::map<std::string, Attribute> left = {{"direction", StrAttr("LEFT")}};
  EXPECT_EQ(Out<uint16_t>(RunOp(
                "BitShift", {Array::Vector<uint16_t>({65535, 1, 1}), Array::Vector<uint16_t>({15, 16, 40})}, 11, left)),
            std::vector<uint16_t>({32768, 0, 0}));
  EXPECT_EQ(Out<uint64_t>(RunOp("BitShift", {Array::Vector<uint64_t>({1}), Array::Vector<uint64_t>({63})}, 11, left)),
            std::vector<uint64_t>({uint64_t{1} << 63}));
  EXPECT_FALSE(RunOp("BitShift", {Array::Vector<uint8_t>({1}), Array::Vector<uint8_t>({1})}, 11).status.ok());
}

TEST(Elementwise, BroadcastShapesAndLegacyAxis) {
  Array a(ElemType::kFloat, {2, 3});
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = static_cast<float>(i);
  Array col(ElemType::kFloat, {2, 1});
  col.data<float>()[0] = 10;
  col.data<float>()[1] = 20;
  RunResult r = RunOp("Add", {a, col});
  EXPECT_EQ(Out<float>(r), std::vector<float>({10, 11, 12, 23, 24, 25}));
  // Opset 6: B of shape [2] placed at axis 0 of A.
  RunResult legacy =
      RunOp("Add", {a, Array::Vector<float>({10, 20})}, 6, {{"broadcast", IntAttr(1)}, {"axis", IntAttr(0)}});
  EXPECT_EQ(Out<float>(legacy), std::vector<float>({10, 11, 12, 23, 24, 25}));
  EXPECT_FALSE(RunOp("Add", {a, Array::Vector<float>({1, 2})}).status.ok());
  // Where over three broadcast shapes, strings included.
  Array cond(ElemType::kBool, {2, 1});
  cond.data<bool>()[0] = true;
  Array xs = Array::Vector<std::string>({"a", "b"});
  Array ys = Array::Scalar<std::string>("z");
  RunResult w = RunOp("Where", {cond, xs, ys});
  EXPECT_EQ(Out<std::string>(w), std::vector<std::string>({"a", "b", "z", "z"}));
}

TEST(Elementwise, ClipAndVariadic) {
  auto x = Array::Vector<float>({-2, 0.5f, 3, NAN});
  EXPECT_EQ(Out<float>(RunOp("Clip", {x, Array::Scalar<float>(-1), Array()}))[0], -1);
  auto c = Out<float>(RunOp("Clip", {x, Array::Scalar<float>(0), Array::Scalar<float>(1)}));
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[2], 1);
  EXPECT_TRUE(std::isnan(c[3]));
  std::map<std::string, Attribute> old = {{"max", Attribute{}}};
  old["max"].type = Attribute::Type::kFloat;
  old["max"].f = 0.f;
  EXPECT_EQ(Out<float>(RunOp("Clip", {x}, 6, old))[2], 0);
  auto m = Out<float>(RunOp("Max", {x, Array::Scalar<float>(1), Array::Vector<float>({0, 0, 0, 0})}));
  EXPECT_EQ(m[0], 1);
  EXPECT_EQ(m[2], 3);
  EXPECT_TRUE(std::isnan(m[3]));
  EXPECT_EQ(Out<float>(RunOp("Mean", {Array::Vector<float>({1, 2}), Array::Vector<float>({3, 4})})),
            std::vector<float>({2, 3}));
}

TEST(Elementwise, CastStringsAndHalves) {
  std::map<std::string, Attribute> to_str = {{"to", IntAttr(8)}};
  auto s = Out<std::string>(
      RunOp("Cast", {Array::Vector<float>({0.1f, 1.f, 1e-5f, -2.5f, NAN, -INFINITY, 0.039187793f})}, 13, to_str));
  EXPECT_EQ(s, std::vector<std::string>({"0.1", "1.0", "1e-05", "-2.5", "NaN", "-INF", "0.039187793"}));
  std::map<std::string, Attribute> to_float = {{"to", IntAttr(1)}};
  auto f =
      Out<float>(RunOp("Cast", {Array::Vector<std::string>({"3.5", " 1e3", "+INF", "-inf", "100"})}, 13, to_float));
  EXPECT_EQ(f[0], 3.5f);
  EXPECT_EQ(f[1], 1000.f);
  EXPECT_EQ(f[2], INFINITY);
  EXPECT_EQ(f[3], -INFINITY);
  EXPECT_TRUE(std::isnan(Out<float>(RunOp("Cast", {Array::Vector<std::string>({"NaN"})}, 13, to_float))[0]));
  EXPECT_FALSE(RunOp("Cast", {Array::Vector<std::string>({"hello"})}, 13, to_float).status.ok());
  std::map<std::string, Attribute> to_i8 = {{"to", IntAttr(3)}};
  EXPECT_EQ(Out<int8_t>(RunOp("Cast", {Array::Vector<float>({-1.9f, 300.f, NAN, 1e30f})}, 13, to_i8)),
            std::vector<int8_t>({-1, 44, 0, 127}));
  EXPECT_EQ(Out<int8_t>(RunOp("Cast", {Array::Vector<std::string>({"-7", "100.5"})}, 13, to_i8)),
            std::vector<int8_t>({-7, 100}));
  std::map<std::string, Attribute> to_bf16 = {{"to", IntAttr(16)}};
  auto b = Out<bf16>(RunOp("Cast", {Array::Vector<float>({1.00390625f, 1.01171875f})}, 13, to_bf16));
  EXPECT_EQ(b[0].bits, 0x3f80);  // halfway: to even
  EXPECT_EQ(b[1].bits, 0x3f82);  // halfway: to even (up)
  Array like(ElemType::kFloat16, {0});
  auto h = Out<fp16>(RunOp("CastLike", {Array::Vector<double>({0.1}), like}));
  EXPECT_EQ(h[0].bits, fp16(0.1f).bits);
}

}  // namespace
}  // namespace tessera::onnx

// The interpreter frees each value after its last reader: a chain of
// element-wise nodes holds two activations at a time, not all of them.
#include <stdexcept>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "tessera/onnx/interpreter.h"
#include "tessera/onnx/model_loader.h"
#include "tessera/onnx/test_model.h"

namespace tessera::onnx {
namespace {

// x -> Relu -> a1 -> Relu -> a2 ... -> a{n}; a1 is also read by the last node
// (Add) when `reuse_first`, so it must stay alive to the end.
std::string ChainModel(int n, bool reuse_first) {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = testing::NewModelWithFloatInput(&m);
  std::string prev = "x";
  for (int i = 1; i <= n; ++i) {
    auto* node = g->add_node();
    node->set_op_type("Relu");
    node->add_input(prev);
    prev = fmt::format("a{}", i);
    node->add_output(prev);
  }
  if (reuse_first) {
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->add_input(prev);
    add->add_input("a1");
    prev = "sum";
    add->add_output(prev);
  }
  g->add_output()->set_name(prev);
  return m.SerializeAsString();
}

TEST(Interpreter, DeadValuesAreFreedAfterTheirLastReader) {
  const int64_t n = 1 << 18;  // 1 MiB of float
  Array x(ElemType::kFloat, {n});
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  const int64_t mb = n * 4;
  for (bool reuse_first : {false, true}) {
    auto model = ParseModel(ChainModel(6, reuse_first), "chain.onnx");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    Interpreter interp(*model);
    auto out = interp.Run({{"x", Value::Tensor(x)}});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const Array& y = (*out)[0].tensor;
    EXPECT_EQ(y.data<float>()[0], 0.f);  // relu(-3)
    EXPECT_EQ(y.data<float>()[6], reuse_first ? 6.f : 3.f);
    // Two activations live at a time (three while a1 waits for the Add);
    // keeping everything would hold all seven.
    EXPECT_LE(interp.peak_live_bytes(), (reuse_first ? 3 : 2) * mb) << reuse_first;
    EXPECT_GE(interp.peak_live_bytes(), 2 * mb);
  }
}

// A shape taken from the model's data that no memory could hold is the
// node's error, not a crash.
TEST(Interpreter, AbsurdShapesFromDataAreErrors) {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = testing::NewModelWithFloatInput(&m);
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(::onnx::TensorProto::INT64);
  auto* node = g->add_node();
  node->set_op_type("ConstantOfShape");
  node->add_input("x");
  node->add_output("y");
  g->add_output()->set_name("y");
  auto model = ParseModel(m.SerializeAsString(), "big.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{int64_t{1} << 50}, {1 << 30, 1 << 30, 1 << 30}}) {
    Interpreter interp(*model);
    auto out = interp.Run({{"x", Value::Tensor(Array::Vector<int64_t>(shape))}});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("ConstantOfShape"), std::string::npos) << out.status().ToString();
    EXPECT_NE(out.status().message().find("too large"), std::string::npos) << out.status().ToString();
  }
  // Kernels that do not check: the Array itself refuses (an exception the
  // interpreter turns into the node's error), also when the product overflows.
  EXPECT_THROW(Array(ElemType::kFloat, {int64_t{1} << 41}), std::length_error);
  EXPECT_THROW(Array(ElemType::kFloat, {1 << 30, 1 << 30, 1 << 30, 1 << 30}), std::length_error);
}

}  // namespace
}  // namespace tessera::onnx

// The loader and the runner's comparison: TensorProto fields, malformed
// files (truncated, bit-flipped, nonsense) as clear errors, never crashes.
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <random>
#include <sstream>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "tessera/graph/tape.h"
#include "tessera/onnx/backend_suite.h"
#include "tessera/onnx/interpreter.h"
#include "tessera/onnx/model_loader.h"
#include "tessera/onnx/tensor_proto.h"
#include "tessera/onnx/test_model.h"
#include "tessera/onnx/trainable.h"

namespace tessera::onnx {
namespace {

const char* kNodeDir = "/usr/share/libonnx-testdata/data/node";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TensorProto, TypedFieldsAndRawDataAgree) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.add_dims(2);
  for (float v : {1.f, -2.f, 3.5f, 0.f}) t.add_float_data(v);
  auto a = ArrayFromProto(t, "t");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(a->data<float>()[2], 3.5f);
  ::onnx::TensorProto back;
  ArrayToProto(*a, &back);
  auto b = ArrayFromProto(back, "back");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(CompareValues(Value::Tensor(*b), Value::Tensor(*a), 0, 0), "");

  // fp16 in int32_data, bool, uint64.
  ::onnx::TensorProto h;
  h.set_data_type(::onnx::TensorProto::FLOAT16);
  h.add_dims(1);
  h.add_int32_data(0x3C00);  // 1.0
  auto ha = ArrayFromProto(h, "h");
  ASSERT_TRUE(ha.ok());
  EXPECT_EQ(ha->GetDouble(0), 1.0);
}

TEST(TensorProto, MismatchedDataIsAnErrorNamingTheTensor) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(3);
  t.add_float_data(1.f);
  auto a = ArrayFromProto(t, "initializer 'w'");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("initializer 'w'"), std::string::npos) << a.status().ToString();
  EXPECT_NE(a.status().message().find("float_data holds 1 values, the dims say 3"), std::string::npos);

  t.clear_float_data();
  t.set_raw_data(std::string(5, '\0'));
  EXPECT_FALSE(ArrayFromProto(t, "w").ok());
  t.set_dims(0, -1);
  EXPECT_FALSE(ArrayFromProto(t, "w").ok());
  t.set_dims(0, int64_t{1} << 50);
  EXPECT_FALSE(ArrayFromProto(t, "w").ok());
  t.set_dims(0, 3);
  t.set_data_type(14);  // complex64
  EXPECT_FALSE(ArrayFromProto(t, "w").ok());
  t.set_data_type(99);
  EXPECT_FALSE(ArrayFromProto(t, "w").ok());
}

TEST(ModelLoader, MissingEmptyAndNonsenseFilesAreClearErrors) {
  auto missing = LoadModelFile("/nonexistent/model.onnx");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.onnx"), std::string::npos);
  EXPECT_FALSE(ParseModel("", "empty.onnx").ok());
  auto junk = ParseModel("this is not a protobuf at all \xff\xff\xff", "junk.onnx");
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.onnx"), std::string::npos);
}

TEST(ModelLoader, UndefinedNodeInputIsAnError) {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = testing::NewModelWithFloatInput(&m);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("y");  // never defined
  n->add_output("z");
  g->add_output()->set_name("z");
  auto r = ParseModel(m.SerializeAsString(), "m.onnx");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reads 'y'"), std::string::npos) << r.status().ToString();
}

// Mutated copies of real models — truncated at every few bytes, bytes
// flipped at random — load as a model or fail with a Status; those that
// load run (or fail) on their test inputs without crashing, on the
// interpreter and through TrainableModel's lowering.
TEST(ModelLoader, FuzzedModelsNeverCrash) {
  ASSERT_TRUE(std::filesystem::exists(kNodeDir))
      << kNodeDir << " is missing: scripts/install-deps.sh installs libonnx-testdata";
  std::mt19937_64 rng(7);
  int loaded = 0, rejected = 0, lowered = 0;
  for (const char* name : {"test_abs", "test_add_bcast", "test_conv_with_strides_padding", "test_if", "test_loop11",
                           "test_gather_0", "test_reshape_negative_dim", "test_batchnorm_example",
                           "test_layer_normalization_default_axis", "test_softmax_axis_1"}) {
    const std::string dir = std::string(kNodeDir) + "/" + name;
    const std::string bytes = Slurp(dir + "/model.onnx");
    ASSERT_FALSE(bytes.empty()) << dir;
    std::vector<std::string> variants;
    for (size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 40) variants.push_back(bytes.substr(0, cut));
    for (int k = 0; k < 300; ++k) {
      std::string v = bytes;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) v[rng() % v.size()] = static_cast<char>(rng() & 0xff);
      variants.push_back(std::move(v));
    }
    for (const std::string& v : variants) {
      StatusOr<Model> m = ParseModel(v, name);
      if (!m.ok()) {
        ++rejected;
        EXPECT_NE(m.status().message().find(name), std::string::npos) << m.status().ToString();
        continue;
      }
      ++loaded;
      // Run on the case's inputs where they bind; any Status is fine.
      std::map<std::string, Value> inputs;
      for (const ValueInfo& in : m->graph.inputs) {
        const std::string f = dir + "/test_data_set_0/input_" + std::to_string(inputs.size()) + ".pb";
        if (m->graph.initializers.count(in.name) || !std::filesystem::exists(f)) continue;
        StatusOr<Value> val = LoadValueFile(f, in);
        if (val.ok()) inputs[in.name] = *val;
      }
      Interpreter interp(*m);
      (void)interp.Run(inputs);
      // And through the lowering onto Tessera's operators (onnx run's graph
      // engine, onnx train): a Status or a result, never a crash.
      TrainableOptions o;
      o.training = false;
      StatusOr<std::unique_ptr<TrainableModel>> tm = TrainableModel::Create(*m, o);
      if (!tm.ok()) continue;
      std::vector<Tensor> ts;
      for (const std::string& in : (*tm)->input_names()) {
        auto it = inputs.find(in);
        StatusOr<Tensor> t = it != inputs.end() && it->second.is_tensor() ? TensorFromArray(it->second.tensor, in)
                                                                          : StatusOr<Tensor>(InvalidArgument("none"));
        if (t.ok()) ts.push_back(*t);
      }
      graph::NoGradGuard no_grad;
      (void)(*tm)->Forward(ts);
      ++lowered;
    }
  }
  // Both outcomes happen (the mutations reach past the protobuf framing).
  EXPECT_GT(rejected, 100) << loaded << " loaded";
  EXPECT_GT(loaded, 100) << rejected << " rejected";
  EXPECT_GT(lowered, 100);
  std::printf("fuzzed models: %d loaded (and ran), %d of them also through the lowering, %d rejected\n", loaded,
              lowered, rejected);
}

TEST(BackendRunner, ComparesWithOnnxTolerances) {
  Array want = Array::Vector<float>({1.f, 100.f, std::nanf("")});
  Array got = want.Clone();
  EXPECT_EQ(CompareValues(Value::Tensor(got), Value::Tensor(want), 1e-3, 1e-7), "");
  got.data<float>()[1] = 100.09f;  // within rtol 1e-3
  EXPECT_EQ(CompareValues(Value::Tensor(got), Value::Tensor(want), 1e-3, 1e-7), "");
  got.data<float>()[1] = 100.2f;
  EXPECT_NE(CompareValues(Value::Tensor(got), Value::Tensor(want), 1e-3, 1e-7), "");
  got.data<float>()[1] = 100.f;
  got.data<float>()[2] = 0.f;  // NaN expected
  EXPECT_NE(CompareValues(Value::Tensor(got), Value::Tensor(want), 1e-3, 1e-7), "");
  EXPECT_NE(
      CompareValues(Value::Tensor(Array::Vector<int64_t>({1, 2})), Value::Tensor(Array::Vector<int32_t>({1, 2})), 1, 1),
      "");  // types must match
  EXPECT_NE(
      CompareValues(Value::Tensor(Array::Vector<int64_t>({1, 2})), Value::Tensor(Array::Vector<int64_t>({1, 3})), 1, 1),
      "");  // integers exactly
}

// An operator nobody implements is a failure of that case, not a skip,
// and it names the operator.
TEST(BackendRunner, UnsupportedOperatorFails) {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g = testing::NewModelWithFloatInput(&m);
  auto* n = g->add_node();
  n->set_op_type("NoSuchOperatorAnywhere");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  const std::string dir = ::testing::TempDir() + "/onnx_unsupported";
  std::filesystem::create_directories(dir + "/case/test_data_set_0");
  std::ofstream(dir + "/case/model.onnx", std::ios::binary) << m.SerializeAsString();
  ASSERT_TRUE(SaveTensorFile(Array::Vector<float>({1.f}), "x", dir + "/case/test_data_set_0/input_0.pb").ok());
  ASSERT_TRUE(SaveTensorFile(Array::Vector<float>({1.f}), "y", dir + "/case/test_data_set_0/output_0.pb").ok());
  SuiteOptions o;
  auto results = RunBackendSuite(dir, o, nullptr);
  ASSERT_TRUE(results.ok());
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ((*results)[0].outcome, CaseResult::Outcome::kFail);
  EXPECT_NE((*results)[0].reason.find("NoSuchOperatorAnywhere"), std::string::npos) << (*results)[0].reason;
}

}  // namespace
}  // namespace tessera::onnx

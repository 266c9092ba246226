// TrainableModel: gradients of lowered ONNX models against finite
// differences, graph-mode capture and replay, training with AdamW and the
// trained model written back to .onnx (and run by the interpreter), errors.
#include "tessera/onnx/trainable.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "tessera/graph/compiled_function.h"
#include "tessera/graph/gradcheck_test_util.h"
#include "tessera/onnx/interpreter.h"
#include "tessera/onnx/model_loader.h"
#include "tessera/onnx/tensor_proto.h"
#include "tessera/optim/adamw.h"
#include "tessera/tensor/rng.h"

namespace tessera::onnx {
namespace {

// Builds small ModelProtos node by node.
struct Builder {
  ::onnx::ModelProto m;
  ::onnx::GraphProto* g;
  uint64_t seed = 1;
  explicit Builder(int64_t opset = 17) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test");
  }
  void Input(const std::string& name, ::onnx::TensorProto::DataType type = ::onnx::TensorProto::FLOAT) {
    auto* in = g->add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  }
  void Output(const std::string& name) { g->add_output()->set_name(name); }
  void Init(const std::string& name, const Array& a) {
    ::onnx::TensorProto* t = g->add_initializer();
    ArrayToProto(a, t);
    t->set_name(name);
  }
  void Weight(const std::string& name, std::vector<int64_t> shape, float scale = 0.5f) {
    Array a(ElemType::kFloat, shape);
    Tensor r = Tensor::Empty(shape);
    FillUniform(r, seed++, -scale, scale);
    std::memcpy(a.data<float>(), r.data<float>(), a.nbytes());
    Init(name, a);
  }
  ::onnx::NodeProto* Node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    ::onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(outs.at(0));
    for (const auto& i : ins) n->add_input(i);
    for (const auto& o : outs) n->add_output(o);
    return n;
  }
  static void Int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void Ints(::onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  Model Load() const {
    StatusOr<Model> model = ParseModel(m.SerializeAsString(), "test.onnx");
    TESSERA_CHECK(model.ok(), "{}", model.status().ToString());
    return *model;
  }
};

// x [4, 6] -> Gemm(W1 [8, 6], transB) -> Relu -> MatMul(W2 [8, 3]) + b2 -> Softmax.
Builder Mlp() {
  Builder b;
  b.Input("x");
  b.Weight("w1", {8, 6});
  b.Weight("b1", {8});
  b.Weight("w2", {8, 3});
  b.Weight("b2", {3});
  Builder::Int(b.Node("Gemm", {"x", "w1", "b1"}, {"h"}), "transB", 1);
  b.Node("Relu", {"h"}, {"r"});
  b.Node("MatMul", {"r", "w2"}, {"m"});
  b.Node("Add", {"m", "b2"}, {"z"});
  b.Node("Softmax", {"z"}, {"y"});
  b.Output("y");
  return b;
}

// x [2, 3, 6, 6] -> Conv 3x3 pad 1 -> BatchNormalization -> Relu -> MaxPool 2
// -> Conv 1x1 -> GlobalAveragePool -> Flatten -> Gemm -> y [2, 5].
Builder Cnn() {
  Builder b;
  b.Input("x");
  b.Weight("c1", {4, 3, 3, 3});
  b.Weight("c1b", {4});
  b.Weight("gamma", {4});
  b.Weight("beta", {4});
  b.Init("mean", Array::Vector<float>({0.1f, -0.2f, 0.0f, 0.3f}));
  b.Init("var", Array::Vector<float>({1.0f, 0.5f, 2.0f, 1.5f}));
  b.Weight("c2", {6, 4, 1, 1});
  b.Weight("fc", {5, 6});
  b.Weight("fcb", {5});
  auto* conv = b.Node("Conv", {"x", "c1", "c1b"}, {"a"});
  Builder::Ints(conv, "pads", {1, 1, 1, 1});
  b.Node("BatchNormalization", {"a", "gamma", "beta", "mean", "var"}, {"bn"});
  b.Node("Relu", {"bn"}, {"r"});
  auto* pool = b.Node("MaxPool", {"r"}, {"p"});
  Builder::Ints(pool, "kernel_shape", {2, 2});
  Builder::Ints(pool, "strides", {2, 2});
  b.Node("Conv", {"p", "c2"}, {"c"});
  b.Node("GlobalAveragePool", {"c"}, {"gap"});
  b.Node("Flatten", {"gap"}, {"f"});
  Builder::Int(b.Node("Gemm", {"f", "fc", "fcb"}, {"y"}), "transB", 1);
  b.Output("y");
  return b;
}

// ids [2, 5] -> Gather(emb [11, 8]) -> LayerNormalization -> Transpose ->
// Reshape -> ReduceMean over the sequence -> y [2, 8].
Builder Embedder() {
  Builder b;
  b.Input("ids", ::onnx::TensorProto::INT64);
  b.Weight("emb", {11, 8}, 1.0f);
  b.Weight("ln_g", {8});
  b.Weight("ln_b", {8});
  b.Init("shape", Array::Vector<int64_t>({2, 8, 5}));
  b.Node("Gather", {"emb", "ids"}, {"e"});
  b.Node("LayerNormalization", {"e", "ln_g", "ln_b"}, {"n"});
  Builder::Ints(b.Node("Transpose", {"n"}, {"t"}), "perm", {0, 2, 1});
  b.Node("Reshape", {"t", "shape"}, {"s"});
  auto* mean = b.Node("ReduceMean", {"s"}, {"y"});
  Builder::Ints(mean, "axes", {2});
  Builder::Int(mean, "keepdims", 0);
  b.Output("y");
  return b;
}

Tensor RandomInput(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::Empty(shape);
  FillUniform(t, seed, -1.0f, 1.0f);
  return t;
}

std::unique_ptr<TrainableModel> Make(const Builder& b, TrainableOptions o = {}) {
  auto tm = TrainableModel::Create(b.Load(), o);
  TESSERA_CHECK(tm.ok(), "{}", tm.status().ToString());
  return std::move(*tm);
}

std::vector<Tensor> ParamsAnd(const TrainableModel& tm, const Tensor& x) {
  std::vector<Tensor> v;
  for (const auto& [name, t] : tm.parameters()) v.push_back(t);
  if (x.requires_grad()) v.push_back(x);
  return v;
}

TEST(TrainableModel, ParametersAndBuffersAreClassified) {
  auto cnn = Make(Cnn());
  std::vector<std::string> params, buffers;
  for (const auto& [n, t] : cnn->parameters()) params.push_back(n);
  for (const auto& [n, t] : cnn->buffers()) buffers.push_back(n);
  EXPECT_EQ(params, (std::vector<std::string>{"beta", "c1", "c1b", "c2", "fc", "fcb", "gamma"}));
  EXPECT_EQ(buffers, (std::vector<std::string>{"mean", "var"}));
  EXPECT_EQ(cnn->input_names(), std::vector<std::string>{"x"});
  TrainableOptions frozen;
  frozen.frozen = {"c1", "fc"};
  EXPECT_EQ(Make(Cnn(), frozen)->parameters().size(), 5u);
}

TEST(TrainableModel, GradientsMatchFiniteDifferences) {
  {
    auto mlp = Make(Mlp());
    Tensor x = RandomInput({4, 6}, 7).set_requires_grad(true);
    graph::testing::ExpectGradientsMatch("mlp", ParamsAnd(*mlp, x), [&](const std::vector<Tensor>&) {
      return graph::testing::Project((*mlp->Forward({x}))[0]);
    });
  }
  {
    TrainableOptions inference;
    inference.training = false;  // running statistics: the function is smooth in every input
    auto cnn = Make(Cnn(), inference);
    Tensor x = RandomInput({2, 3, 6, 6}, 8).set_requires_grad(true);
    graph::testing::GradCheckOptions fine;
    fine.eps = 1e-4;  // steps of 1e-2 or 1e-3 in a BatchNorm shift move values across ReLU / max-pool switches
    graph::testing::ExpectGradientsMatch(
        "cnn", ParamsAnd(*cnn, x),
        [&](const std::vector<Tensor>&) { return graph::testing::Project((*cnn->Forward({x}))[0]); }, fine);
  }
  {
    auto emb = Make(Embedder());
    Tensor ids = Tensor::FromInts({0, 3, 3, 10, 7, 1, 2, 9, 4, 3}, {2, 5});
    graph::testing::ExpectGradientsMatch("embedder", ParamsAnd(*emb, Tensor()), [&](const std::vector<Tensor>&) {
      return graph::testing::Project((*emb->Forward({ids}))[0]);
    });
  }
}

// Graph mode: the lowered model captured by a GraphFunction replays with
// the eager result and gradients (a Gemm + Add of a bias became one GEMM).
TEST(TrainableModel, GraphModeReplaysTheModel) {
  auto mlp = Make(Mlp());
  graph::GraphFunction f("onnx_mlp", [&](const std::vector<Tensor>& in) { return *mlp->Forward(in); });
  const Tensor x = RandomInput({4, 6}, 9);
  for (int call = 0; call < 4; ++call) {
    for (const auto& [n, t] : mlp->parameters()) Tensor(t).ZeroGrad();
    Tensor loss = graph::testing::Project(f({x})[0]);
    graph::Backward(loss);
    std::vector<std::vector<float>> graph_grads;
    for (const auto& [n, t] : mlp->parameters()) graph_grads.push_back(t.grad().ToFloatVector());
    for (const auto& [n, t] : mlp->parameters()) Tensor(t).ZeroGrad();
    Tensor eager = graph::testing::Project((*mlp->Forward({x}))[0]);
    graph::Backward(eager);
    EXPECT_NEAR(loss.Item(), eager.Item(), 1e-6);
    size_t k = 0;
    for (const auto& [n, t] : mlp->parameters()) {
      const std::vector<float> e = t.grad().ToFloatVector();
      for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(graph_grads[k][i], e[i], 1e-5) << n << " call " << call;
      ++k;
    }
  }
  EXPECT_EQ(f.fallback_reason(), "");
  EXPECT_EQ(f.replays(), 2);
  ASSERT_NE(f.compiled(), nullptr);
  EXPECT_GT(f.compiled()->graph.nodes.size(), 0u);
}

// Fine-tuning: AdamW on the lowered model fits a target; the trained
// initializers written back to .onnx run on the interpreter with the
// lowered model's output, and the input file is untouched.
TEST(TrainableModel, TrainsAndWritesTheTrainedModel) {
  const std::string dir = ::testing::TempDir() + "/onnx_trainable";
  std::filesystem::create_directories(dir);
  const std::string in_path = dir + "/mlp.onnx", out_path = dir + "/mlp_trained.onnx";
  const Builder b = Mlp();
  std::ofstream(in_path, std::ios::binary) << b.m.SerializeAsString();
  auto mlp = Make(b);
  const Tensor x = RandomInput({4, 6}, 10);
  const Tensor target = Tensor::FromVector({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}, {4, 3});
  optim::AdamWOptions o;
  o.lr = 0.05;
  o.weight_decay = 0;
  optim::AdamW opt(mlp->parameters(), o);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    for (const auto& [n, t] : mlp->parameters()) Tensor(t).ZeroGrad();
    const Tensor d = graph::Sub((*mlp->Forward({x}))[0], target);
    Tensor loss = graph::Mean(graph::Mul(d, d));
    (step == 0 ? first : last) = loss.Item();
    graph::Backward(loss);
    opt.Step();
  }
  EXPECT_LT(last, first / 10) << "loss " << first << " -> " << last;

  const std::string before = [&] {
    std::ifstream in(in_path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  ASSERT_TRUE(SaveModelWithInitializers(in_path, mlp->Initializers(), out_path).ok());
  StatusOr<Model> trained = LoadModelFile(out_path);
  ASSERT_TRUE(trained.ok()) << trained.status().ToString();
  Interpreter interp(*trained);
  StatusOr<std::vector<Value>> run = interp.Run({{"x", Value::Tensor(ArrayFromTensor(x))}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  graph::NoGradGuard no_grad;
  const std::vector<float> want = (*mlp->Forward({x}))[0].ToFloatVector();
  const Array& got = (*run)[0].tensor;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.data<float>()[i], want[i], 1e-5);
  std::ifstream in(in_path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), before);

  // A wrong name or shape writes nothing.
  std::map<std::string, Array> bad = mlp->Initializers();
  bad["w1"] = Array(ElemType::kFloat, {2, 2});
  Status s = SaveModelWithInitializers(in_path, bad, dir + "/bad.onnx");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("initializer 'w1'"), std::string::npos) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.onnx"));
  bad = {{"nope", Array::Vector<float>({1.f})}};
  EXPECT_FALSE(SaveModelWithInitializers(in_path, bad, dir + "/bad.onnx").ok());
}

// An exporter's shape arithmetic (Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, as torch.onnx.export writes x.view(x.size(0), -1)) is folded on
// every call from the tensors' shapes, so the model follows the batch size.
TEST(TrainableModel, ExportersShapeArithmeticIsFolded) {
  Builder b(13);
  b.Input("x");
  b.Weight("w", {4});
  b.Init("zero", Array::Scalar<int64_t>(0));
  b.Init("axes", Array::Vector<int64_t>({0}));
  b.Init("minus_one", Array::Vector<int64_t>({-1}));
  b.Node("Mul", {"x", "w"}, {"m"});
  b.Node("Shape", {"m"}, {"s"});
  Builder::Int(b.Node("Gather", {"s", "zero"}, {"n"}), "axis", 0);
  b.Node("Unsqueeze", {"n", "axes"}, {"n1"});
  Builder::Int(b.Node("Concat", {"n1", "minus_one"}, {"shape"}), "axis", 0);
  b.Node("Reshape", {"m", "shape"}, {"y"});
  b.Output("y");
  auto tm = Make(b);
  EXPECT_EQ(tm->lowered_nodes(), 2);  // Mul and Reshape; the rest is static
  for (int64_t batch : {2, 5}) {
    auto y = tm->Forward({RandomInput({batch, 3, 4}, 11)});
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    EXPECT_EQ((*y)[0].shape(), (Shape{batch, 12}));
  }
  graph::testing::ExpectGradientsMatch("folded shape", ParamsAnd(*tm, Tensor()), [&](const std::vector<Tensor>&) {
    return graph::testing::Project((*tm->Forward({RandomInput({2, 3, 4}, 12)}))[0]);
  });
}

// An exporter's nine-node LayerNorm becomes one LayerNormalization with the
// same outputs and gradients; a pattern whose intermediate is read elsewhere
// is left alone.
TEST(TrainableModel, DecomposedLayerNormIsFused) {
  auto build = [](bool extra_reader, bool shared_gamma = false) {
    Builder b(13);
    b.Input("x");
    b.Weight("gamma", {6}, 1.0f);
    b.Weight("beta", {6});
    b.Init("two", Array::Scalar<float>(2.0f));
    b.Init("eps", Array::Scalar<float>(1e-5f));
    auto mean = [&](const std::string& in, const std::string& out) {
      Builder::Ints(b.Node("ReduceMean", {in}, {out}), "axes", {-1});
    };
    mean("x", "m");
    b.Node("Sub", {"x", "m"}, {"d"});
    b.Node("Pow", {"d", "two"}, {"p"});
    mean("p", "v");
    b.Node("Add", {"v", "eps"}, {"e"});
    b.Node("Sqrt", {"e"}, {"s"});
    b.Node("Div", {"d", "s"}, {"n"});
    if (shared_gamma) b.Node("Identity", {"gamma"}, {"gamma_shared"});     // an exporter's deduplicated initializer
    b.Node("Mul", {shared_gamma ? "gamma_shared" : "gamma", "n"}, {"y"});  // operands in either order
    b.Node("Add", {"y", "beta"}, {"z"});
    b.Output("z");
    if (extra_reader) b.Output("v");  // an intermediate the pattern does not own
    return b;
  };
  TrainableOptions plain;
  plain.fuse_layer_norm = false;
  auto fused = Make(build(false)), unfused = Make(build(false), plain), kept = Make(build(true));
  EXPECT_EQ(fused->fused_layer_norms(), 1);
  EXPECT_EQ(fused->lowered_nodes(), 1);
  EXPECT_EQ(unfused->lowered_nodes(), 9);
  EXPECT_EQ(kept->fused_layer_norms(), 0);
  EXPECT_EQ(Make(build(false, true))->fused_layer_norms(), 1);
  Tensor x = RandomInput({3, 4, 6}, 13).set_requires_grad(true);
  std::vector<std::vector<float>> grads[2];
  std::vector<float> outs[2];
  int k = 0;
  for (auto* tm : {fused.get(), unfused.get()}) {
    x.ZeroGrad();
    for (const auto& [n, t] : tm->parameters()) Tensor(t).ZeroGrad();
    Tensor y = (*tm->Forward({x}))[0];
    outs[k] = y.ToFloatVector();
    graph::Backward(graph::testing::Project(y));
    grads[k].push_back(x.grad().ToFloatVector());
    for (const auto& [n, t] : tm->parameters()) grads[k].push_back(t.grad().ToFloatVector());
    ++k;
  }
  for (size_t i = 0; i < outs[0].size(); ++i) EXPECT_NEAR(outs[0][i], outs[1][i], 1e-5);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t g = 0; g < grads[0].size(); ++g) {
    for (size_t i = 0; i < grads[0][g].size(); ++i) EXPECT_NEAR(grads[0][g][i], grads[1][g][i], 1e-4) << g;
  }
}

TEST(TrainableModel, ErrorsNameTheNode) {
  {
    Builder b;
    b.Input("x");
    b.Node("Sin", {"x"}, {"y"});
    b.Output("y");
    auto tm = TrainableModel::Create(b.Load());
    ASSERT_FALSE(tm.ok());
    EXPECT_NE(tm.status().message().find("node 'y' (Sin): no differentiable Tessera operator"), std::string::npos)
        << tm.status().ToString();
  }
  {
    Builder b;  // a shape computed at run time
    b.Input("x");
    b.Input("shape", ::onnx::TensorProto::INT64);
    b.Node("Reshape", {"x", "shape"}, {"y"});
    b.Output("y");
    auto tm = TrainableModel::Create(b.Load());
    ASSERT_TRUE(tm.ok());
    auto out = (*tm)->Forward({RandomInput({2, 3}, 1), Tensor::FromInts({3, 2}, {2})});
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("input 'shape' must be a constant"), std::string::npos)
        << out.status().ToString();
    TrainableOptions o;  // ... unless bound as a constant
    o.constant_inputs["shape"] = Array::Vector<int64_t>({3, 2});
    auto fixed = TrainableModel::Create(b.Load(), o);
    ASSERT_TRUE(fixed.ok());
    auto y = (*fixed)->Forward({RandomInput({2, 3}, 1)});
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    EXPECT_EQ((*y)[0].shape(), (Shape{3, 2}));
  }
  {
    auto mlp = Make(Mlp());
    auto wrong_count = mlp->Forward({});
    EXPECT_FALSE(wrong_count.ok());
    auto wrong_type = mlp->Forward({Tensor::FromInts({1, 2}, {2})});
    ASSERT_FALSE(wrong_type.ok());
    EXPECT_NE(wrong_type.status().message().find("expected float32"), std::string::npos)
        << wrong_type.status().ToString();
    auto wrong_shape = mlp->Forward({RandomInput({4, 5}, 2)});  // the kernel's OpError, tagged with the node
    ASSERT_FALSE(wrong_shape.ok());
    EXPECT_NE(wrong_shape.status().message().find("(Gemm)"), std::string::npos) << wrong_shape.status().ToString();
    // A failure after some nodes recorded leaves the tape as it was (empty).
    Builder b;  // Mul records (w is a parameter), then Reshape fails
    b.Input("x");
    b.Init("shape", Array::Vector<int64_t>({7}));
    b.Weight("w", {2, 3});
    b.Node("Mul", {"x", "w"}, {"m"});
    b.Node("Reshape", {"m", "shape"}, {"y"});
    b.Output("y");
    auto tm = Make(b);
    auto fails = tm->Forward({RandomInput({2, 3}, 4)});
    ASSERT_FALSE(fails.ok());
    EXPECT_NE(fails.status().message().find("cannot reshape [2, 3] to [7]"), std::string::npos)
        << fails.status().ToString();
    EXPECT_EQ(graph::TapeSize(), 0u);
  }
}

}  // namespace
}  // namespace tessera::onnx

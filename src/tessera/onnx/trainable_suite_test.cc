// TrainableModel against the ONNX backend tests (Debian's libonnx-testdata:
// node, pytorch-converted, pytorch-operator and simple cases): every case
// whose operators it lowers, run on
// Tessera's differentiable operators, must reproduce the expected outputs
// within the suite's tolerances. Cases it cannot take (an operator without
// a lowering, a non-float input) are counted, not compared.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/graph/tape.h"
#include "tessera/onnx/backend_suite.h"
#include "tessera/onnx/model_loader.h"
#include "tessera/onnx/trainable.h"

namespace tessera::onnx {
namespace {

const std::string kDataDir = "/usr/share/libonnx-testdata/data";

struct CaseOutcome {
  bool ran = false;      // the model ran through TrainableModel
  bool lowered = false;  // ... with at least one node on a differentiable operator (not all folded)
  std::string mismatch;  // non-empty: the lowered model disagrees with ONNX's expected output
};

CaseOutcome RunCase(const std::filesystem::path& dir) {
  CaseOutcome r;
  StatusOr<Model> model = LoadModelFile((dir / "model.onnx").string());
  if (!model.ok()) return r;
  TrainableOptions options;
  options.training = false;  // inference, as the suite's expected outputs (training_mode nodes say otherwise)
  const std::filesystem::path data = dir / "test_data_set_0";
  if (!std::filesystem::exists(data)) return r;
  // The case's inputs, in the graph's order (initializers are not listed in
  // these models); integer ones (shapes, axes, indices) are bound as constants.
  std::vector<std::pair<std::string, Array>> given;
  for (size_t i = 0; i < model->graph.inputs.size(); ++i) {
    const ValueInfo& info = model->graph.inputs[i];
    if (model->graph.initializers.count(info.name)) continue;
    StatusOr<Value> v = LoadValueFile((data / ("input_" + std::to_string(given.size()) + ".pb")).string(), info);
    if (!v.ok() || !v->is_tensor()) return r;
    given.emplace_back(info.name, v->tensor);
    const ElemType type = v->tensor.type();
    if (type == ElemType::kInt64 || type == ElemType::kInt32) options.constant_inputs[info.name] = v->tensor;
  }
  StatusOr<std::unique_ptr<TrainableModel>> tm = TrainableModel::Create(*model, options);
  if (!tm.ok()) return r;
  std::vector<Tensor> inputs;
  for (const auto& [name, array] : given) {
    if (options.constant_inputs.count(name)) continue;
    StatusOr<Tensor> t = TensorFromArray(array, name);
    if (!t.ok()) return r;
    inputs.push_back(*t);
  }
  graph::NoGradGuard no_grad;
  StatusOr<std::vector<Tensor>> out = (*tm)->Forward(inputs);
  if (!out.ok()) return r;  // e.g. a shape the lowering refuses (asymmetric pads)
  r.ran = true;
  r.lowered = (*tm)->lowered_nodes() > 0;
  for (size_t i = 0; i < out->size(); ++i) {
    const ValueInfo& info = model->graph.outputs[i];
    StatusOr<Value> want = LoadValueFile((data / ("output_" + std::to_string(i) + ".pb")).string(), info);
    if (!want.ok()) {
      r.mismatch = want.status().ToString();
      return r;
    }
    const std::string diff = CompareValues(Value::Tensor(ArrayFromTensor((*out)[i])), *want, 1e-3, 1e-6);
    if (!diff.empty()) {
      r.mismatch = fmt::format("output {}: {}", i, diff);
      return r;
    }
  }
  return r;
}

TEST(TrainableSuite, LoweredCasesMatchOnnxOutputs) {
  ASSERT_TRUE(std::filesystem::exists(kDataDir + "/node"))
      << kDataDir << "/node is missing: scripts/install-deps.sh installs libonnx-testdata";
  // The node cases, and the layers PyTorch exported (their weights are initializers).
  std::vector<std::filesystem::path> cases;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    if (!std::filesystem::exists(kDataDir + "/" + suite)) continue;
    for (const auto& e : std::filesystem::directory_iterator(kDataDir + "/" + suite)) cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  int lowered = 0, folded_only = 0;
  std::map<std::string, int> lowered_ops;
  std::vector<std::string> mismatches;
  for (const auto& dir : cases) {
    const CaseOutcome r = RunCase(dir);
    if (!r.ran) continue;
    ++(r.lowered ? lowered : folded_only);
    if (!r.mismatch.empty()) mismatches.push_back(dir.string() + ": " + r.mismatch);
  }
  std::printf("TrainableModel on %zu backend cases: %d lowered, %d folded only (integer inputs), %zu mismatches\n",
              cases.size(), lowered, folded_only, mismatches.size());
  for (const std::string& m : mismatches) ADD_FAILURE() << m;
  // Every lowered operator has several cases in the suite; fewer than this
  // means the lowering (or the loader) stopped taking whole families.
  EXPECT_GE(lowered, 250);
}

}  // namespace
}  // namespace tessera::onnx

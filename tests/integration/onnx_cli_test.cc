// `tessera onnx` as a user runs it: the ONNX backend node suite from
// Debian's libonnx-testdata (the pass rate the issue asks for, and every
// failing case listed with its reason in docs/onnx.md), `onnx run` on a
// model and its test inputs (outputs equal to the expected .pb files), and
// clear errors for a damaged model.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tessera::testing {
namespace {

using std::chrono::seconds;

const std::string kNodeDir = "/usr/share/libonnx-testdata/data/node";

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(OnnxCli, NodeSuitePassesAndEveryFailureIsDocumented) {
  ASSERT_TRUE(std::filesystem::exists(kNodeDir))
      << kNodeDir << " is missing: scripts/install-deps.sh installs libonnx-testdata";
  const std::string dir = FreshTempDir("onnx-suite");
  const std::string json = dir + "/suite.json";
  ProcResult r = RunCommand({TESSERA_BIN, "onnx", "test", kNodeDir, "--quiet", "--json", json}, seconds(1200));
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  const nlohmann::json j = nlohmann::json::parse(Slurp(json));
  const int passed = j.at("passed").get<int>(), failed = j.at("failed").get<int>(),
            skipped = j.at("skipped").get<int>();
  const int total = passed + failed + skipped;
  EXPECT_GE(total, 900);  // Debian's ONNX 1.12 has 932 node cases
  EXPECT_GE(passed, 0.9 * total) << r.out;
  // The final line is the summary users read.
  EXPECT_NE(r.out.find(fmt::format("{} passed, {} failed, {} skipped", passed, failed, skipped)), std::string::npos);
  // docs/onnx.md names every failing case (with its reason).
  const std::string doc = Slurp(std::string(TESSERA_SOURCE_DIR) + "/docs/onnx.md");
  for (const auto& c : j.at("cases")) {
    if (c.at("outcome") == "pass") continue;
    const std::string name = c.at("name").get<std::string>();
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos)
        << name << " fails (" << c.at("reason").get<std::string>() << ") and docs/onnx.md does not list it";
  }
}

TEST(OnnxCli, RunWritesOutputsEqualToTheExpectedOnes) {
  const std::string cs = kNodeDir + "/test_conv_with_strides_padding";
  const std::string dir = FreshTempDir("onnx-run");
  ProcResult r =
      RunCommand({TESSERA_BIN, "onnx", "run", cs + "/model.onnx", "--input", "x=" + cs + "/test_data_set_0/input_0.pb",
                  "--input", "W=" + cs + "/test_data_set_0/input_1.pb", "--output-dir", dir, "--json"},
                 seconds(60));
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("outputs").size(), 1u);
  EXPECT_EQ(j.at("outputs")[0].at("shape"), nlohmann::json({1, 1, 4, 3}));
  EXPECT_EQ(j.at("engine"), "graph");  // every node lowers: Tessera's graph engine runs it
  // The written file runs through the suite's comparison: one case
  // directory whose expected output is what `run` wrote.
  const std::string c = dir + "/case";
  std::filesystem::create_directories(c + "/test_data_set_0");
  std::filesystem::copy_file(cs + "/model.onnx", c + "/model.onnx");
  std::filesystem::copy_file(cs + "/test_data_set_0/input_0.pb", c + "/test_data_set_0/input_0.pb");
  std::filesystem::copy_file(cs + "/test_data_set_0/input_1.pb", c + "/test_data_set_0/input_1.pb");
  std::filesystem::copy_file(dir + "/y.pb", c + "/test_data_set_0/output_0.pb");
  ProcResult same = RunCommand({TESSERA_BIN, "onnx", "test", c}, seconds(60));
  ASSERT_EQ(same.exit_code, 0) << Diagnose(same);
  EXPECT_NE(same.out.find("1 passed, 0 failed, 0 skipped"), std::string::npos) << same.out;

  // The interpreter gives the same output (within the suite's tolerance).
  const std::string dir2 = FreshTempDir("onnx-run-interp");
  ProcResult ri = RunCommand(
      {TESSERA_BIN, "onnx", "run", cs + "/model.onnx", "--input", "x=" + cs + "/test_data_set_0/input_0.pb", "--input",
       "W=" + cs + "/test_data_set_0/input_1.pb", "--output-dir", dir2, "--json", "--engine", "interpreter"},
      seconds(60));
  ASSERT_EQ(ri.exit_code, 0) << Diagnose(ri);
  EXPECT_EQ(nlohmann::json::parse(ri.out).at("engine"), "interpreter");
  std::filesystem::copy_file(dir2 + "/y.pb", c + "/test_data_set_0/output_0.pb",
                             std::filesystem::copy_options::overwrite_existing);
  ProcResult same2 = RunCommand({TESSERA_BIN, "onnx", "test", c}, seconds(60));
  EXPECT_NE(same2.out.find("1 passed, 0 failed, 0 skipped"), std::string::npos) << same2.out;

  // A model with an operator the graph engine lacks runs on the interpreter
  // under auto (the note says why); --engine graph refuses it.
  const std::string sin = kNodeDir + "/test_sin";
  ProcResult fb = RunCommand({TESSERA_BIN, "onnx", "run", sin + "/model.onnx", "--input",
                              "x=" + sin + "/test_data_set_0/input_0.pb", "--json"},
                             seconds(60));
  ASSERT_EQ(fb.exit_code, 0) << Diagnose(fb);
  const nlohmann::json jf = nlohmann::json::parse(fb.out);
  EXPECT_EQ(jf.at("engine"), "interpreter");
  EXPECT_NE(jf.at("engine_note").get<std::string>().find("(Sin)"), std::string::npos) << fb.out;
  ProcResult refused = RunCommand({TESSERA_BIN, "onnx", "run", sin + "/model.onnx", "--input",
                                   "x=" + sin + "/test_data_set_0/input_0.pb", "--engine", "graph"},
                                  seconds(60));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("no differentiable Tessera operator for Sin"), std::string::npos) << Diagnose(refused);

  // --repeat times the runs; --profile splits the kernel time by operator
  // (on the interpreter, whose nodes run one by one).
  ProcResult prof =
      RunCommand({TESSERA_BIN, "onnx", "run", cs + "/model.onnx", "--input", "x=" + cs + "/test_data_set_0/input_0.pb",
                  "--input", "W=" + cs + "/test_data_set_0/input_1.pb", "--repeat", "3", "--profile"},
                 seconds(60));
  ASSERT_EQ(prof.exit_code, 0) << Diagnose(prof);
  EXPECT_NE(prof.out.find("3 runs: median"), std::string::npos) << prof.out;
  EXPECT_NE(prof.err.find("kernel time by operator over 3 runs"), std::string::npos) << prof.err;
  EXPECT_NE(prof.err.find("Conv"), std::string::npos) << prof.err;
  EXPECT_NE(prof.err.find("3 calls"), std::string::npos) << prof.err;
}

TEST(OnnxCli, DamagedModelsAndBadInputsAreClearErrors) {
  const std::string dir = FreshTempDir("onnx-bad");
  const std::string bytes = Slurp(kNodeDir + "/test_conv_with_strides_padding/model.onnx");
  std::ofstream(dir + "/truncated.onnx", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  ProcResult t = RunCommand({TESSERA_BIN, "onnx", "run", dir + "/truncated.onnx"}, seconds(30));
  EXPECT_EQ(t.exit_code, 1) << Diagnose(t);
  EXPECT_NE(t.err.find("truncated.onnx"), std::string::npos) << t.err;

  ProcResult wrong =
      RunCommand({TESSERA_BIN, "onnx", "run", kNodeDir + "/test_abs/model.onnx", "--input", "nope=/x.pb"}, seconds(30));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("the model has no input 'nope' (its inputs: x)"), std::string::npos) << wrong.err;

  ProcResult missing = RunCommand({TESSERA_BIN, "onnx", "run", kNodeDir + "/test_abs/model.onnx"}, seconds(30));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("graph input 'x' was not given"), std::string::npos) << missing.err;
}

TEST(OnnxCli, OpsListsTheImplementedOperators) {
  ProcResult r = RunCommand({TESSERA_BIN, "onnx", "ops"}, seconds(30));
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  std::set<std::string> ops;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.find(' ') == std::string::npos && !line.empty()) ops.insert(line);
  }
  EXPECT_GE(ops.size(), 150u);
  for (const char* op :
       {"Conv", "MatMul", "Gemm", "LSTM", "Loop", "If", "Scan", "QuantizeLinear", "Resize", "Einsum"}) {
    EXPECT_TRUE(ops.count(op)) << op;
  }
  // docs/operators.md lists every one (as a whole word).
  const std::string doc = Slurp(std::string(TESSERA_SOURCE_DIR) + "/docs/operators.md");
  auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const std::string& op : ops) {
    bool found = false;
    for (size_t at = doc.find(op); at != std::string::npos && !found; at = doc.find(op, at + 1)) {
      found = (at == 0 || !word_char(doc[at - 1])) && (at + op.size() >= doc.size() || !word_char(doc[at + op.size()]));
    }
    EXPECT_TRUE(found) << op << " is implemented but docs/operators.md does not list it";
  }
}

// A float TensorProto by hand: dims (field 1), data_type FLOAT (field 2),
// raw_data (field 9).
std::string FloatTensorProto(const std::vector<int64_t>& dims, const std::vector<float>& v) {
  std::string s;
  auto varint = [&](uint64_t x) {
    for (; x >= 0x80; x >>= 7) s += static_cast<char>((x & 0x7f) | 0x80);
    s += static_cast<char>(x);
  };
  for (int64_t d : dims) {
    s += '\x08';
    varint(static_cast<uint64_t>(d));
  }
  s += '\x10';
  varint(1);
  s += '\x4a';
  varint(v.size() * sizeof(float));
  s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return s;
}

// `onnx train`: PyTorch's exported Linear layer fine-tuned toward a
// constant target in graph mode; the saved model then runs with `onnx run`
// and gives (nearly) the target; an operator without a backward (Sin) is a clear error.
TEST(OnnxCli, TrainFineTunesAndSavesAModel) {
  const std::string cs = "/usr/share/libonnx-testdata/data/pytorch-converted/test_Linear";
  ASSERT_TRUE(std::filesystem::exists(cs)) << cs << " is missing: scripts/install-deps.sh installs libonnx-testdata";
  const std::string dir = FreshTempDir("onnx-train");
  std::ofstream(dir + "/target.pb", std::ios::binary) << FloatTensorProto({4, 8}, std::vector<float>(32, 0.5f));
  const std::string input = "0=" + cs + "/test_data_set_0/input_0.pb", saved = dir + "/trained.onnx";
  ProcResult r = RunCommand({TESSERA_BIN, "onnx", "train", cs + "/model.onnx", "--input", input, "--target",
                             dir + "/target.pb", "--steps", "60", "--lr", "0.05", "--graph", "--json", "--save", saved},
                            seconds(120));
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_LT(j.at("final_loss").get<double>(), j.at("first_loss").get<double>() / 100) << r.out;
  EXPECT_EQ(j.at("parameters").get<int>(), 2);               // weight and bias
  EXPECT_EQ(j.at("graph_replays").get<int>(), 58) << r.out;  // calls 3..60 replay the captured graph
  EXPECT_EQ(j.at("graph_fallback").get<std::string>(), "");
  ProcResult run = RunCommand({TESSERA_BIN, "onnx", "run", saved, "--input", input, "--output-dir", dir}, seconds(60));
  ASSERT_EQ(run.exit_code, 0) << Diagnose(run);
  const std::string out = Slurp(dir + "/3.pb");  // the model's output is named "3"
  ASSERT_GE(out.size(), 128u);
  const float* y = reinterpret_cast<const float*>(out.data() + out.size() - 128);  // raw_data ends the message
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], 0.5f, 0.05f) << i;

  // --data: batches in ONNX's test-data layout, cycled (two different inputs, each with its target).
  for (int b = 0; b < 2; ++b) {
    const std::string bd = dir + "/data/test_data_set_" + std::to_string(b);
    std::filesystem::create_directories(bd);
    std::vector<float> x(40);
    for (int i = 0; i < 40; ++i) x[static_cast<size_t>(i)] = static_cast<float>(((i * 7 + b * 3) % 11) - 5) / 5.0f;
    std::ofstream(bd + "/input_0.pb", std::ios::binary) << FloatTensorProto({4, 10}, x);
    std::ofstream(bd + "/output_0.pb", std::ios::binary) << FloatTensorProto({4, 8}, std::vector<float>(32, 0.5f));
  }
  ProcResult rd = RunCommand({TESSERA_BIN, "onnx", "train", cs + "/model.onnx", "--data", dir + "/data", "--steps",
                              "80", "--lr", "0.05", "--graph", "--json"},
                             seconds(120));
  ASSERT_EQ(rd.exit_code, 0) << Diagnose(rd);
  const nlohmann::json jd = nlohmann::json::parse(rd.out);
  EXPECT_EQ(jd.at("batches").get<int>(), 2);
  const auto& ld = jd.at("losses");
  // Both batches' losses fall (steps 1, 3, ... are batch 0; 2, 4, ... batch 1).
  EXPECT_LT(ld[78].get<double>(), ld[0].get<double>() / 10) << rd.out;
  EXPECT_LT(ld[79].get<double>(), ld[1].get<double>() / 10) << rd.out;
  EXPECT_EQ(jd.at("graph_replays").get<int>(), 78);  // one signature: both batches have one shape
  ProcResult both = RunCommand(
      {TESSERA_BIN, "onnx", "train", cs + "/model.onnx", "--data", dir + "/data", "--target", dir + "/target.pb"},
      seconds(60));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("--data replaces --input and --target"), std::string::npos) << Diagnose(both);

  ProcResult bad = RunCommand({TESSERA_BIN, "onnx", "train", kNodeDir + "/test_sin/model.onnx", "--input",
                               "x=" + kNodeDir + "/test_sin/test_data_set_0/input_0.pb", "--target",
                               kNodeDir + "/test_sin/test_data_set_0/output_0.pb"},
                              seconds(60));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("(Sin): no differentiable Tessera operator for Sin"), std::string::npos) << Diagnose(bad);
}

}  // namespace
}  // namespace tessera::testing

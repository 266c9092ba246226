// Runs every registered parity case for each of its dtypes and checks that
// every operator Tessera ships has cases, forward and backward.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

TEST(Parity, AllOps) {
  ASSERT_FALSE(Registry().empty());
  int checked = 0;
  for (const ParityCase& c : Registry()) {
    for (DType dtype : c.dtypes) {
      Status st = CheckParity(c, dtype);
      EXPECT_TRUE(st.ok()) << st.ToString();
      ++checked;
    }
  }
  std::printf("parity: %d case x dtype runs over %zu cases\n", checked, Registry().size());
}

TEST(Parity, CoversEveryOperator) {
  // Operators (and their backward) the foundation requires, each in fp32 and bf16.
  const std::set<std::string> required = {
      "matmul",      "batched_matmul", "add",          "sub",       "mul",       "div",
      "sum",         "mean",           "max",          "softmax",   "log_softmax", "cross_entropy",
      "embedding",   "layernorm",      "rmsnorm",      "gelu",      "silu",      "swiglu",
      "dropout",     "causal_attention", "rope",       "topk",      "gather",    "scatter_add",
      "concat",      "split"};
  std::map<std::string, std::set<DType>> fwd, bwd;
  for (const ParityCase& c : Registry()) {
    for (DType d : c.dtypes) {
      fwd[c.op].insert(d);
      if (c.backward) bwd[c.op].insert(d);
    }
  }
  for (const std::string& op : required) {
    for (DType d : {DType::kF32, DType::kBF16}) {
      EXPECT_TRUE(fwd[op].count(d)) << op << " has no forward parity case for " << DTypeName(d);
      EXPECT_TRUE(bwd[op].count(d)) << op << " has no backward parity case for " << DTypeName(d);
    }
  }
  // The image operators are fp32-only by contract (ops/conv, ops/pool,
  // ops/norm/batch_norm.h).
  for (const char* op : {"conv2d", "max_pool2d", "avg_pool2d", "global_avg_pool2d", "batch_norm2d"}) {
    EXPECT_TRUE(fwd[op].count(DType::kF32)) << op << " has no fp32 forward parity case";
    EXPECT_TRUE(bwd[op].count(DType::kF32)) << op << " has no fp32 backward parity case";
  }
}

}  // namespace
}  // namespace tessera::ops::testing

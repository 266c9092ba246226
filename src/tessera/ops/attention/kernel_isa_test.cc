// The attention and cross-entropy kernels have AVX-512 and AVX2 variants
// picked at run time; the parity suite runs whichever this CPU selects, so
// this test reruns those operators' parity cases with TESSERA_KERNEL_ISA
// forced to avx2 (and to avx512 where the CPU has it).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tessera/hal/cpu_features.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

void RunCases(const std::string& isa) {
  const std::set<std::string> ops = {"causal_attention", "cross_entropy"};
  detail::SetKernelIsa(isa);
  EXPECT_EQ(detail::UseAvx512(), isa == "avx512");
  int runs = 0;
  for (const ParityCase& c : Registry()) {
    if (!ops.count(c.op)) continue;
    for (DType dtype : c.dtypes) {
      Status st = CheckParity(c, dtype);
      EXPECT_TRUE(st.ok()) << isa << ": " << st.ToString();
      ++runs;
    }
  }
  detail::SetKernelIsa("");
  EXPECT_GT(runs, 10);
}

TEST(KernelIsa, Avx2VariantsMatchReference) { RunCases("avx2"); }

TEST(KernelIsa, Avx512VariantsMatchReference) {
  if (!hal::GetCpuFeatures().HasAvx512Core()) GTEST_SKIP() << "CPU has no AVX-512";
  RunCases("avx512");
}

}  // namespace
}  // namespace tessera::ops::testing

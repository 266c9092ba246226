// ops::Linear: x @ w^T + bias with the bias in the GEMM epilogue must be
// bitwise MatMul(x, w, false, true) followed by an element-wise Add, for
// every dtype, for one and several K blocks, strided inputs and both
// implementations; bad biases are refused with a message naming them.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/elementwise/elementwise.h"
#include "tessera/ops/matmul/matmul.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops {
namespace {

using ::testing::HasSubstr;

void ExpectSameBits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.Contiguous(), w = want.Contiguous();
  const auto* gb = static_cast<const unsigned char*>(g.raw_data());
  const auto* wb = static_cast<const unsigned char*>(w.raw_data());
  const size_t bytes = static_cast<size_t>(g.numel()) * DTypeSize(g.dtype());
  EXPECT_TRUE(std::equal(gb, gb + bytes, wb)) << what << ": fused bias differs from MatMul + Add";
}

struct LinearCase {
  Shape x;
  int64_t out;
};

TEST(Linear, BiasInTheEpilogueIsBitwiseMatMulThenAdd) {
  // K = 1000 spans several K blocks (fp32 scratch, then the epilogue); the
  // others fit one (strips rounded straight from L1). Sizes off the tiles.
  const std::vector<LinearCase> cases = {{{1, 1}, 1},      {{5, 7}, 3},         {{2, 13, 33}, 65},
                                         {{97, 257}, 129}, {{3, 40, 1000}, 37}, {{600, 64}, 700}};
  int seed = 1;
  for (const DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const LinearCase& c : cases) {
      for (const Impl impl : {Impl::kOptimized, Impl::kReference}) {
        ScopedImpl scope(impl);
        const int64_t in = c.x.back();
        Tensor x = testing::RandomTensor(c.x, dt, seed++);
        Tensor w = testing::RandomTensor({c.out, in}, dt, seed++);
        Tensor b = testing::RandomTensor({c.out}, dt, seed++, -4.0f, 4.0f);
        const std::string what = std::string(DTypeName(dt)) + " x " + ShapeString(c.x) + " out " +
                                 std::to_string(c.out) + (impl == Impl::kReference ? " (reference)" : "");
        ExpectSameBits(Linear(x, w, b), Add(MatMul(x, w, false, true), b), what);
        ExpectSameBits(Linear(x, w, Tensor()), MatMul(x, w, false, true), what + " without bias");
      }
    }
  }
}

TEST(Linear, StridedInputsAndEmptyShapes) {
  Tensor base = testing::RandomTensor({6, 20, 18}, DType::kF32, 3);
  Tensor w = testing::RandomTensor({7, 9}, DType::kF32, 4);
  Tensor b = testing::RandomTensor({7}, DType::kF32, 5);
  Tensor x = base.Slice(2, 0, 18, 2);  // column stride 2: copied
  ExpectSameBits(Linear(x, w, b), Add(MatMul(x, w, false, true), b), "strided x");
  Tensor wt = testing::RandomTensor({9, 7}, DType::kF32, 6).Transpose(0, 1);  // a transposed view
  ExpectSameBits(Linear(x, wt, b), Add(MatMul(x, wt, false, true), b), "transposed weight view");
  Tensor gapped = base.Slice(0, 0, 6, 2).Slice(2, 0, 9);  // gapped batch: one GEMM per matrix
  ExpectSameBits(Linear(gapped, w, b), Add(MatMul(gapped, w, false, true), b), "gapped batch");
  EXPECT_EQ(Linear(Tensor::Zeros({0, 9}), w, b).shape(), (Shape{0, 7}));
  // K = 0: the product is zero and the result is the bias on every row.
  Tensor y = Linear(Tensor::Zeros({2, 0}), Tensor::Zeros({3, 0}), Tensor::FromVector({1, 2, 3}, {3}));
  EXPECT_EQ(y.ToFloatVector(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
}

TEST(Linear, BadBiasNamesIt) {
  Tensor x = Tensor::Zeros({2, 4}), w = Tensor::Zeros({3, 4});
  try {
    Linear(x, w, Tensor::Zeros({4}));
    FAIL() << "a bias of the wrong length was accepted";
  } catch (const OpError& e) {
    EXPECT_THAT(e.what(), HasSubstr("linear: bias must be fp32 [3]"));
  }
  EXPECT_THROW(Linear(x, w, Tensor::Zeros({3}, DType::kBF16)), OpError);  // dtype differs from x
  EXPECT_THROW(Linear(x, w, Tensor::Zeros({1, 3})), OpError);
  EXPECT_THROW(Linear(x, Tensor::Zeros({3, 5}), Tensor::Zeros({3})), OpError);  // in features differ
  EXPECT_THROW(Linear(x, Tensor::Zeros({2, 3, 4}), Tensor::Zeros({3})), OpError);
}

}  // namespace
}  // namespace tessera::ops

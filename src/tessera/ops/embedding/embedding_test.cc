// Embedding: parity cases (fp32/bf16/fp16, repeated ids, int32 ids, 2-D ids)
// and unit tests for id errors and thread-count independence of backward.
#include <omp.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tessera/base/error.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/embedding/embedding.h"
#include "tessera/ops/testing/parity.h"

namespace tessera::ops::testing {
namespace {

ParityCase MakeCase(int64_t v, int64_t d, Shape ids_shape, DType index_dtype = DType::kI64, bool f16 = false) {
  ParityCase c;
  c.op = "embedding";
  c.name = fmt::format("V={} D={} ids {} {}", v, d, ShapeString(ids_shape), DTypeName(index_dtype));
  c.make_inputs = [=](DType dtype, uint64_t seed) {
    Tensor ids = RandomIndices(ids_shape, v, seed + 3);
    if (index_dtype != DType::kI64) ids = Tensor::FromInts(ids.ToIntVector(), ids_shape, index_dtype);
    return Tensors{RandomTensor({v, d}, dtype, seed), ids};
  };
  c.forward = [](const Tensors& in) { return Tensors{Embedding(in[0], in[1])}; };
  c.backward = [](const Tensors& in, const Tensors&, const Tensors& gout) {
    return Tensors{EmbeddingBackward(gout[0], in[1], in[0].shape(), in[0].dtype()), Tensor()};
  };
  if (f16) c.dtypes = {DType::kF32, DType::kBF16, DType::kF16};
  return c;
}

TESSERA_PARITY_CASES {
  return std::vector<ParityCase>{
      MakeCase(1, 1, {1}),
      MakeCase(5, 3, {17}, DType::kI64, true),  // many repeats
      MakeCase(50, 24, {2, 9}, DType::kI32),
      MakeCase(1000, 64, {4, 128}),              // threads
  };
}

TEST(Embedding, ForwardCopiesRows) {
  Tensor w = Tensor::FromVector({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor ids = Tensor::FromInts({2, 0, 2, 1}, {2, 2});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    Tensor out = Embedding(w, ids);
    EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
    EXPECT_EQ(out.ToFloatVector(), (std::vector<float>{20, 21, 0, 1, 20, 21, 10, 11}));
    Tensor g = EmbeddingBackward(Tensor::Full({2, 2, 2}, 1.0), ids, {3, 2}, DType::kF32);
    EXPECT_EQ(g.ToFloatVector(), (std::vector<float>{1, 1, 1, 1, 2, 2}));
  }
}

TEST(Embedding, RejectsOutOfRangeIds) {
  Tensor w = Tensor::Zeros({4, 3});
  for (Impl impl : {Impl::kReference, Impl::kOptimized}) {
    ScopedImpl scope(impl);
    try {
      Embedding(w, Tensor::FromInts({0, 3, 4, 1}, {4}));
      FAIL() << "expected OpError";
    } catch (const OpError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
      EXPECT_NE(msg.find("id 4 at flat position 2"), std::string::npos) << msg;
    }
    EXPECT_THROW(Embedding(w, Tensor::FromInts({-1}, {1})), OpError);
    EXPECT_THROW(Embedding(w, Tensor::Zeros({2})), OpError);
    EXPECT_THROW(Embedding(Tensor::Zeros({4}), Tensor::FromInts({0}, {1})), OpError);
    EXPECT_THROW(EmbeddingBackward(Tensor::Zeros({2, 3}), Tensor::FromInts({0, 9}, {2}), {4, 3}, DType::kF32),
                 OpError);
    EXPECT_THROW(EmbeddingBackward(Tensor::Zeros({2, 2}), Tensor::FromInts({0, 1}, {2}), {4, 3}, DType::kF32),
                 OpError);
  }
}

TEST(Embedding, BackwardIsBitwiseIndependentOfThreads) {
  const int64_t v = 300, d = 96, n = 4096;
  Tensor ids = RandomIndices({n}, v, 11);
  Tensor g = RandomTensor({n, d}, DType::kF32, 12, -3.0f, 3.0f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<float> one = EmbeddingBackward(g, ids, {v, d}, DType::kF32).ToFloatVector();
  omp_set_num_threads(2);
  std::vector<float> two = EmbeddingBackward(g, ids, {v, d}, DType::kF32).ToFloatVector();
  omp_set_num_threads(saved);
  std::vector<float> ref;
  {
    ScopedImpl scope(Impl::kReference);
    ref = EmbeddingBackward(g, ids, {v, d}, DType::kF32).ToFloatVector();
  }
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(FloatBits(one[i]), FloatBits(two[i])) << i;
    ASSERT_EQ(FloatBits(one[i]), FloatBits(ref[i])) << i;
  }
}

TEST(Embedding, BackwardOfLargeVocabularyMatchesReferenceBitwise) {
  // 70000 x 128 fp32 = 36 MB: untouched rows are zeroed with streaming stores.
  const int64_t v = 70000, d = 128, n = 2048;
  Tensor ids = RandomIndices({n}, v, 21);
  Tensor g = RandomTensor({n, d}, DType::kF32, 22);
  std::vector<float> opt = EmbeddingBackward(g, ids, {v, d}, DType::kF32).ToFloatVector();
  ScopedImpl scope(Impl::kReference);
  std::vector<float> ref = EmbeddingBackward(g, ids, {v, d}, DType::kF32).ToFloatVector();
  ASSERT_EQ(opt.size(), ref.size());
  for (size_t i = 0; i < opt.size(); ++i) ASSERT_EQ(FloatBits(opt[i]), FloatBits(ref[i])) << i;
}

}  // namespace
}  // namespace tessera::ops::testing

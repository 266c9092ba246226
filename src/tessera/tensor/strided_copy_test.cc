// CopyStrided (through Tensor::CopyFrom / Contiguous / To) against an
// element-by-element oracle on the flat index: permutations, slices with
// steps, expanded (stride-0) sources, dtype conversions, long single rows
// split across threads, overlapping views of one storage, thread counts.
#include "tessera/tensor/strided_copy.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/base/float16.h"
#include "tessera/tensor/tensor.h"

namespace tessera {
namespace {

// Values whose order and bf16 rounding are both checkable.
Tensor Iota(const Shape& shape, DType dtype = DType::kF32) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 1.0001f - 7.5f;
  return Tensor::FromVector(v, shape).To(dtype);
}

// The oracle: the view's elements in row-major order, via multi-index
// arithmetic independent of CopyStrided.
std::vector<float> Oracle(const Tensor& t) {
  std::vector<float> out;
  const Shape& s = t.shape();
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = t.offset();
    for (size_t d = 0; d < s.size(); ++d) off += idx[d] * t.strides()[d];
    const char* base = static_cast<const char*>(t.storage()->data());
    out.push_back(static_cast<float>(internal::ReadAsDouble(base + off * DTypeSize(t.dtype()), t.dtype())));
    for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

std::vector<float> Flat(const Tensor& contiguous) {
  EXPECT_TRUE(contiguous.is_contiguous());
  std::vector<float> out(static_cast<size_t>(contiguous.numel()));
  const char* p = static_cast<const char*>(contiguous.raw_data());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(internal::ReadAsDouble(p + i * DTypeSize(contiguous.dtype()), contiguous.dtype()));
  }
  return out;
}

TEST(StridedCopy, PermutationsSlicesAndExpands) {
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor x = Iota({4, 37, 3, 64});  // [B, T, H, Dh]: >= 2^16 elements, parallel
    for (const Tensor& view : {x.Transpose(1, 2), x.Permute({3, 0, 2, 1}), x.Slice(1, 3, 37, 5),
                               x.Slice(3, 1, 64, 2).Transpose(0, 3), x.Slice(0, 1, 2)}) {
      SCOPED_TRACE(ShapeString(view.shape()) + " threads " + std::to_string(threads));
      EXPECT_EQ(Flat(view.Contiguous()), Oracle(view));
    }
    Tensor row = Iota({1, 1, 70001});
    EXPECT_EQ(Flat(row.Expand({3, 2, 70001}).Contiguous()), Oracle(row.Expand({3, 2, 70001})));
  }
  omp_set_num_threads(2);
}

TEST(StridedCopy, DenseAndLongRowsBitExact) {
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Tensor x = Iota({200003});  // one long row split across threads at odd points
    Tensor y = Tensor::Empty({200003});
    y.Fill(-1.0);  // pooled memory may still hold an earlier copy's values
    y.CopyFrom(x);
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << threads;
    Tensor z = Tensor::Empty({200003});
    z.Fill(-1.0);
    z.Slice(0, 0, 200003).CopyFrom(x);
    EXPECT_EQ(Flat(z), Flat(x));
  }
  omp_set_num_threads(2);
}

TEST(StridedCopy, Bf16ConversionsMatchScalarRounding) {
  // Ties, NaN, infinities, denormals, both signs, then a long tail that takes
  // the vectorized and threaded paths.
  std::vector<float> v = {1.0f,  1.00390625f, 1.01171875f, -1.00390625f, std::numeric_limits<float>::infinity(),
                          -0.0f, 1e-40f,      3.4e38f,     -3.4e38f,     std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 100000; ++i) v.push_back(std::ldexp(static_cast<float>(i % 977) + 0.5f, (i % 60) - 30));
  Tensor f = Tensor::FromVector(v, {static_cast<int64_t>(v.size())});
  Tensor b = f.To(DType::kBF16);
  const bf16* bp = b.data<bf16>();
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(bp[i].bits, bf16::FromFloat(v[i])) << i << " " << v[i];
  }
  Tensor back = b.To(DType::kF32);
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = bp[i].ToFloat();
    const float got = back.data<float>()[i];
    ASSERT_TRUE(std::memcmp(&want, &got, 4) == 0) << i;
  }
  // Strided conversions (transposed bf16 -> fp32 and back).
  Tensor x = Iota({300, 257}, DType::kBF16);
  EXPECT_EQ(Flat(x.Transpose(0, 1).To(DType::kF32)), Oracle(x.Transpose(0, 1)));
  Tensor xf = Iota({300, 257});
  EXPECT_EQ(Flat(xf.Transpose(0, 1).Contiguous().To(DType::kBF16)), Flat(xf.To(DType::kBF16).Transpose(0, 1).Contiguous()));
}

TEST(StridedCopy, OtherConversionsGoThroughDouble) {
  Tensor x = Tensor::FromVector({1.5f, -2.5f, 65504.0f, 1e6f}, {2, 2});
  EXPECT_EQ(x.Transpose(0, 1).To(DType::kF16).ToFloatVector(),
            (std::vector<float>{1.5f, 65504.0f, -2.5f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(x.To(DType::kI64).ToIntVector(), (std::vector<int64_t>{1, -2, 65504, 1000000}));
}

TEST(StridedCopy, OverlappingViewsOfOneStorage) {
  Tensor x = Iota({10});
  std::vector<float> before = x.ToFloatVector();
  x.Slice(0, 1, 10).CopyFrom(x.Slice(0, 0, 9));  // shift right by one: needs a temporary
  std::vector<float> want = before;
  for (int i = 1; i < 10; ++i) want[i] = before[i - 1];
  EXPECT_EQ(x.ToFloatVector(), want);
  x.CopyFrom(x);  // onto itself: unchanged
  EXPECT_EQ(x.ToFloatVector(), want);
  Tensor sq = Iota({3, 3});
  std::vector<float> sqv = sq.ToFloatVector();
  sq.CopyFrom(sq.Transpose(0, 1));  // in-place transpose
  EXPECT_EQ(sq.ToFloatVector(), (std::vector<float>{sqv[0], sqv[3], sqv[6], sqv[1], sqv[4], sqv[7], sqv[2], sqv[5],
                                                    sqv[8]}));
}

TEST(StridedCopy, InsideAParallelRegionStaysSerialAndCorrect) {
  Tensor x = Iota({64, 2048});
  std::vector<float> want = Oracle(x.Transpose(0, 1));
  std::vector<int> ok(4, 0);
#pragma omp parallel num_threads(2)
  {
    Tensor c = x.Transpose(0, 1).Contiguous();
    ok[omp_get_thread_num()] = Flat(c) == want ? 1 : 0;
  }
  EXPECT_EQ(ok[0], 1);
  EXPECT_EQ(ok[1], 1);
}

}  // namespace
}  // namespace tessera

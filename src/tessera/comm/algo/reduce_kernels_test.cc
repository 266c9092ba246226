#include "tessera/comm/algo/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::comm::algo {
namespace {

using comm::GetElement;
using testing::InputValue;
using testing::Reference;
using comm::SetElement;

// ReduceMany over n sources equals the scalar reference for every dtype and
// op, across block boundaries (2048) and odd tails.
TEST(ReduceKernels, ReduceManyMatchesReference) {
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (int n : {1, 2, 3, 8}) {
        const size_t count = 4099;
        const size_t elem = DataTypeSize(dt);
        std::vector<std::vector<uint8_t>> srcs(n, std::vector<uint8_t>(count * elem));
        std::vector<const void*> ptrs;
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) SetElement(srcs[r].data(), dt, i, InputValue(r, i, dt, op));
          ptrs.push_back(srcs[r].data());
        }
        std::vector<uint8_t> dst(count * elem);
        ReduceMany(dst.data(), ptrs.data(), n, count, dt, op, n);
        int bad = 0;
        for (size_t i = 0; i < count && bad < 3; ++i) {
          const double got = GetElement(dst.data(), dt, i);
          const double want = Reference(n, i, dt, op);
          if (!testing::Close(got, want, dt, op)) {
            ++bad;
            ADD_FAILURE() << DataTypeName(dt) << " " << ReduceOpName(op) << " n=" << n << " i=" << i << " got " << got
                          << " want " << want;
          }
        }
      }
    }
  }
}

// ReduceInto chained over sources, then DivideBy for avg, matches too.
TEST(ReduceKernels, ReduceIntoChainAndDivide) {
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      const int n = 5;
      const size_t count = 2053;
      const size_t elem = DataTypeSize(dt);
      std::vector<uint8_t> acc(count * elem), src(count * elem);
      for (size_t i = 0; i < count; ++i) SetElement(acc.data(), dt, i, InputValue(0, i, dt, op));
      for (int r = 1; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) SetElement(src.data(), dt, i, InputValue(r, i, dt, op));
        ReduceInto(acc.data(), src.data(), count, dt, op);
      }
      if (op == ReduceOp::kAvg) DivideBy(acc.data(), count, dt, n);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(testing::Close(GetElement(acc.data(), dt, i), Reference(n, i, dt, op), dt, op))
            << DataTypeName(dt) << " " << ReduceOpName(op) << " i=" << i;
      }
    }
  }
}

// ReduceToMany writes exactly what ReduceMany computes (bitwise) into every
// destination, and both equal an element-by-element reduction: every dtype
// and op, 1-8 sources, 1-3 destinations, all, some or none streamed,
// aligned or not, lengths with and without a partial last line, and
// with the first destination being the first source (in place).
TEST(ReduceKernels, ReduceToManyEqualsReduceManyBitwise) {
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      int k = 0;
      for (int n : {1, 2, 3, 8}) {
        for (size_t count : {size_t{1}, size_t{67}, size_t{4096}, size_t{4099}}) {
          const size_t elem = DataTypeSize(dt);
          const int dsts_n = 1 + k % 3;
          const bool stream = k % 2 == 0;
          const size_t skew = (k % 4 == 3) ? elem : 0;  // misaligned destinations
          const bool in_place = k % 5 == 4;
          ++k;
          std::vector<std::vector<uint8_t>> srcs(n, std::vector<uint8_t>(count * elem + 64));
          std::vector<const void*> ptrs;
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) SetElement(srcs[r].data(), dt, i, InputValue(r, i, dt, op) * (i % 3 + 1));
            ptrs.push_back(srcs[r].data());
          }
          // Element by element (ReduceMany's scalar path for short inputs):
          // an implementation independent of the vector loop under test.
          std::vector<uint8_t> want(count * elem);
          std::vector<const void*> at(n);
          for (size_t i = 0; i < count; ++i) {
            for (int r = 0; r < n; ++r) at[r] = srcs[r].data() + i * elem;
            ReduceMany(want.data() + i * elem, at.data(), n, 1, dt, op, n);
          }
          std::vector<uint8_t> many(count * elem);
          ReduceMany(many.data(), ptrs.data(), n, count, dt, op, n);
          ASSERT_EQ(std::memcmp(many.data(), want.data(), count * elem), 0)
              << DataTypeName(dt) << " " << ReduceOpName(op) << " n=" << n << " count=" << count << ": ReduceMany";
          std::vector<std::vector<uint8_t>> outs(dsts_n, std::vector<uint8_t>(count * elem + 64, 0xab));
          std::vector<void*> dsts;
          for (int d = 0; d < dsts_n; ++d) dsts.push_back(outs[d].data() + skew);
          if (in_place) dsts[0] = srcs[0].data();
          // Every destination streamed, or only the second (mixed).
          const uint64_t mask = stream ? (k % 3 == 1 ? kStreamAll : 0b10) : 0;
          ReduceToMany(dsts.data(), dsts_n, ptrs.data(), n, count, dt, op, n, mask);
          for (int d = 0; d < dsts_n; ++d) {
            ASSERT_EQ(std::memcmp(dsts[d], want.data(), count * elem), 0)
                << DataTypeName(dt) << " " << ReduceOpName(op) << " n=" << n << " count=" << count << " dst " << d
                << (stream ? " stream mask " + std::to_string(mask) : std::string()) << (skew ? " misaligned" : "") << (in_place ? " in place" : "");
            if (!(in_place && d == 0)) {
              ASSERT_EQ(outs[d][skew + count * elem], 0xab) << "wrote past the end";
            }
          }
        }
      }
    }
  }
}

TEST(ReduceKernels, DestinationMayAliasASource) {
  std::vector<float> a(3000), b(3000), c(3000);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  const void* srcs[3] = {a.data(), b.data(), c.data()};
  ReduceMany(c.data(), srcs, 3, a.size(), DataType::kFloat32, ReduceOp::kSum, 0);  // dst is the last source
  for (size_t i = 0; i < a.size(); ++i) { ASSERT_EQ(c[i], static_cast<float>(i) + 3.0f); }
}

TEST(ReduceKernels, Bf16AccumulatesInFloatAndRoundsOnce) {
  // 256 + 1 + 1 in bf16 steps would stay 256 (1 is below half an ulp of 256);
  // accumulated in fp32 it is 258, which bf16 represents exactly.
  bf16 x(256.0f), one(1.0f);
  std::vector<bf16> s0{x}, s1{one}, s2{one}, out(1);
  const void* srcs[3] = {s0.data(), s1.data(), s2.data()};
  ReduceMany(out.data(), srcs, 3, 1, DataType::kBFloat16, ReduceOp::kSum, 0);
  EXPECT_EQ(static_cast<float>(out[0]), 258.0f);
  ReduceInto(s0.data(), s1.data(), 1, DataType::kBFloat16, ReduceOp::kSum);
  EXPECT_EQ(static_cast<float>(s0[0]), 256.0f);
}

TEST(ReduceKernels, IntegersWrapAndAvgTruncates) {
  std::vector<int8_t> a{100, -100, 7}, b{100, -100, -8};
  ReduceInto(a.data(), b.data(), 3, DataType::kInt8, ReduceOp::kSum);
  EXPECT_EQ(a[0], static_cast<int8_t>(-56));
  EXPECT_EQ(a[1], static_cast<int8_t>(56));
  EXPECT_EQ(a[2], -1);
  std::vector<int32_t> c{7, -7, std::numeric_limits<int32_t>::max()}, d{0, 0, 1};
  ReduceInto(c.data(), d.data(), 3, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(c[2], std::numeric_limits<int32_t>::min());
  DivideBy(c.data(), 2, DataType::kInt32, 2);
  EXPECT_EQ(c[0], 3);
  EXPECT_EQ(c[1], -3);
}

TEST(ReduceKernels, Fp16RoundTripsThroughF16c) {
  std::vector<fp16> a(20), b(20);
  for (int i = 0; i < 20; ++i) {
    a[i] = fp16(0.5f * i);
    b[i] = fp16(1000.0f);
  }
  ReduceInto(a.data(), b.data(), 20, DataType::kFloat16, ReduceOp::kMax);
  for (int i = 0; i < 20; ++i) { EXPECT_EQ(static_cast<float>(a[i]), 1000.0f); }
  ReduceInto(a.data(), b.data(), 20, DataType::kFloat16, ReduceOp::kSum);
  for (int i = 0; i < 20; ++i) { EXPECT_EQ(static_cast<float>(a[i]), 2000.0f); }
}

}  // namespace
}  // namespace tessera::comm::algo

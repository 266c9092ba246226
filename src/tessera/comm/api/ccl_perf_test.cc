#include "tessera/comm/api/ccl_perf.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::comm {
namespace {

TEST(CclPerf, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(PerfOp::kSendRecv, 8), 1.0);
}

TEST(CclPerf, ParsesSizesAndOps) {
  EXPECT_EQ(*ParseByteSize("8"), 8u);
  EXPECT_EQ(*ParseByteSize("64M"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("1g"), 1u << 30);
  EXPECT_FALSE(ParseByteSize("12X").ok());
  EXPECT_EQ(*ParsePerfOp("all_reduce"), PerfOp::kAllReduce);
  EXPECT_EQ(*ParsePerfOp("reducescatter"), PerfOp::kReduceScatter);
  EXPECT_FALSE(ParsePerfOp("allfoo").ok());
}

// Every op runs, checks clean, and prints nccl-tests' layout (3 ranks, so
// the per-rank count of gathered ops differs from the size).
TEST(CclPerf, EveryOperationChecksCleanAndPrintsNcclTestsColumns) {
  const PerfOp ops[] = {PerfOp::kAllReduce, PerfOp::kAllGather, PerfOp::kReduceScatter, PerfOp::kAllToAll,
                        PerfOp::kBroadcast, PerfOp::kReduce,    PerfOp::kSendRecv};
  for (PerfOp op : ops) {
    for (bool blocking : {false, true}) {
      std::string text;
      testing::RunRanks(3, testing::TestOptions(), [&](int r, Communicator& c) {
        PerfOptions o;
        o.op = op;
        o.min_bytes = 8;
        o.max_bytes = 96 << 10;
        o.factor = 8;
        o.iters = 3;
        o.warmup = 1;
        o.dtype = op == PerfOp::kAllReduce ? DataType::kBFloat16 : DataType::kFloat32;
        o.redop = op == PerfOp::kReduce ? ReduceOp::kMax : ReduceOp::kSum;
        o.root = 1;
        o.blocking = blocking;
        std::FILE* f = r == 0 ? std::tmpfile() : nullptr;
        StatusOr<PerfResult> res = RunPerf(c, o, f);
        ASSERT_TRUE(res.ok()) << res.status().ToString();
        EXPECT_EQ(res->wrong, 0);
        ASSERT_EQ(res->rows.size(), 5u);  // 8, 64, 512, 4096, 32768
        for (const PerfRow& row : res->rows) {
          EXPECT_EQ(row.wrong[0], 0);
          EXPECT_EQ(row.wrong[1], 0);
          EXPECT_NEAR(row.busbw[0], row.algbw[0] * BusBandwidthFactor(op, 3), 1e-9);
        }
        const PerfRow& last = res->rows.back();
        if (op == PerfOp::kAllGather || op == PerfOp::kReduceScatter || op == PerfOp::kAllToAll) {
          EXPECT_EQ(last.count, 32768u / 4 / 3);
          EXPECT_EQ(last.size, last.count * 3 * 4);
        } else {
          EXPECT_EQ(last.size, 32768u);
        }
        if (f != nullptr) {
          std::rewind(f);
          char buf[4096];
          size_t n;
          while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
          std::fclose(f);
        }
      });
      EXPECT_NE(text.find("#       size         count      type   redop    root     time   algbw   busbw #wrong"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("# Avg bus bandwidth    : "), std::string::npos) << text;
      EXPECT_NE(text.find("# Out of bounds values : 0 OK"), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace tessera::comm

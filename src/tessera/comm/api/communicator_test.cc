// Communicator API behaviour: asynchronous work (many outstanding), Split,
// send/recv, argument checks, timeouts naming the stalled or missing rank,
// Abort, and the failure latch.
#include "tessera/comm/api/communicator.h"

#include <sched.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"

namespace tessera::comm {
namespace {

using testing::RunRanks;
using testing::TestOptions;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point since) { return std::chrono::duration<double, std::milli>(Clock::now() - since).count(); }

TEST(Communicator, ManyOutstandingAsyncOperations) {
  for (const char* algo : {"", "ring"}) {
    RunRanks(4, TestOptions(algo), [&](int r, Communicator& c) {
      constexpr int kOps = 64;
      std::vector<std::vector<float>> bufs(kOps, std::vector<float>(1000));
      std::vector<Work> works;
      for (int k = 0; k < kOps; ++k) {
        std::fill(bufs[k].begin(), bufs[k].end(), static_cast<float>(r + k));
        works.push_back(c.AllReduceAsync(bufs[k].data(), bufs[k].data(), bufs[k].size(), DataType::kFloat32,
                                         ReduceOp::kSum));
      }
      // Blocking calls queue behind the async ones (issue order).
      std::vector<int32_t> g(4);
      int32_t mine = r;
      ASSERT_TRUE(c.AllGather(&mine, g.data(), 1, DataType::kInt32).ok());
      EXPECT_EQ(g, (std::vector<int32_t>{0, 1, 2, 3}));
      for (int k = 0; k < kOps; ++k) {
        ASSERT_TRUE(works[k].Wait().ok());
        EXPECT_TRUE(works[k].Test());
        EXPECT_EQ(bufs[k][999], static_cast<float>(6 + 4 * k)) << k;
      }
    });
  }
}

TEST(Communicator, AsyncOverlapsWithComputation) {
  RunRanks(2, TestOptions(), [&](int r, Communicator& c) {
    std::vector<double> x(1 << 18, r + 1.0);
    Work w = c.AllReduceAsync(x.data(), x.data(), x.size(), DataType::kFloat64, ReduceOp::kSum);
    double acc = 0;  // the caller computes while the progress thread works
    for (int i = 0; i < 100000; ++i) acc += i * 1e-9;
    EXPECT_GT(acc, 0);
    ASSERT_TRUE(w.Wait(std::chrono::milliseconds(20000)).ok());
    EXPECT_EQ(x[12345], 3.0);
  });
}

// The progress thread takes SCHED_BATCH over tcp (a late turn costs no
// bandwidth there) and keeps the policy it inherits on shm.
TEST(Communicator, ProgressThreadPolicyFollowsTheTransport) {
  const int inherited = sched_getscheduler(0);
  for (const auto kind : {transport::TransportKind::kShm, transport::TransportKind::kTcp}) {
    CommOptions o = TestOptions();
    o.transport = kind;
    RunRanks(2, o, [&](int, Communicator& c) {
      int policy = -1;
      Work w = c.SubmitCustom("policy probe", [&](algo::AlgoEnv&) {
        policy = sched_getscheduler(0);
        return Status::Ok();
      });
      ASSERT_TRUE(w.Wait().ok());
      EXPECT_EQ(policy, kind == transport::TransportKind::kTcp ? SCHED_BATCH : inherited)
          << transport::TransportKindName(kind);
    });
  }
}

TEST(Communicator, SplitIntoSubCommunicators) {
  RunRanks(6, TestOptions(), [&](int r, Communicator& c) {
    // Even ranks by descending key, odd ranks by rank; rank 5 opts out.
    const int color = r == 5 ? Communicator::kNoColor : r % 2;
    auto sub = c.Split(color, color == 0 ? -r : r);
    ASSERT_TRUE(sub.ok()) << sub.status().ToString();
    if (r == 5) {
      EXPECT_EQ(*sub, nullptr);
      return;
    }
    Communicator& s = **sub;
    if (color == 0) {
      EXPECT_EQ(s.size(), 3);
      EXPECT_EQ(s.rank(), (4 - r) / 2);  // keys 0, -2, -4 -> ranks 4, 2, 0 in order
    } else {
      EXPECT_EQ(s.size(), 2);
      EXPECT_EQ(s.rank(), r / 2);
    }
    int64_t v = r, sum = 0;
    ASSERT_TRUE(s.AllReduce(&v, &sum, 1, DataType::kInt64, ReduceOp::kSum).ok());
    EXPECT_EQ(sum, color == 0 ? 0 + 2 + 4 : 1 + 3);
    // A split of a split.
    auto sub2 = s.Split(0, 0);
    ASSERT_TRUE(sub2.ok());
    ASSERT_TRUE((*sub2)->Barrier().ok());
    // The parent still works.
    int64_t total = 0;
    v = 1;
    ASSERT_TRUE(s.AllReduce(&v, &total, 1, DataType::kInt64, ReduceOp::kSum).ok());
    EXPECT_EQ(total, s.size());
  });
  // rank 5 still has to take part in the parent's collectives: it did (Split).
}

TEST(Communicator, SendRecvAndTags) {
  RunRanks(3, TestOptions(), [&](int r, Communicator& c) {
    // A ring with SendRecv, larger than the channel buffers.
    const size_t n = 100000;
    std::vector<int32_t> out(n), in(n);
    std::iota(out.begin(), out.end(), r * 1000000);
    ASSERT_TRUE(c.SendRecv(out.data(), n, (r + 1) % 3, in.data(), n, (r + 2) % 3, DataType::kInt32, 7).ok());
    EXPECT_EQ(in[0], ((r + 2) % 3) * 1000000);
    EXPECT_EQ(in[n - 1], ((r + 2) % 3) * 1000000 + static_cast<int32_t>(n - 1));
    // Async Send/Recv pairs between 0 and 1, several in flight, matched in order.
    if (r < 2) {
      std::vector<std::vector<float>> msgs(5, std::vector<float>(50000));
      std::vector<Work> works;
      for (int k = 0; k < 5; ++k) {
        if (r == 0) {
          std::fill(msgs[k].begin(), msgs[k].end(), static_cast<float>(k));
          works.push_back(c.SendAsync(msgs[k].data(), msgs[k].size(), DataType::kFloat32, 1, k));
        } else {
          works.push_back(c.RecvAsync(msgs[k].data(), msgs[k].size(), DataType::kFloat32, 0, k));
        }
      }
      for (int k = 0; k < 5; ++k) {
        ASSERT_TRUE(works[k].Wait().ok());
        if (r == 1) { EXPECT_EQ(msgs[k][49999], static_cast<float>(k)); }
      }
    }
  });
}

TEST(Communicator, TagMismatchIsAnErrorNamingBoth) {
  RunRanks(2, TestOptions(), [&](int r, Communicator& c) {
    float x = 1;
    Status st = r == 0 ? c.Send(&x, 1, DataType::kFloat32, 1, 5) : c.Recv(&x, 1, DataType::kFloat32, 0, 6);
    if (r == 1) {
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.message().find("tag 6"), std::string::npos) << st.ToString();
      EXPECT_NE(st.message().find("tag 5"), std::string::npos) << st.ToString();
    }
  });
}

TEST(Communicator, BadArgumentsAreRejectedWithoutBreakingIt) {
  RunRanks(2, TestOptions(), [&](int r, Communicator& c) {
    std::vector<float> a(16), b(16);
    Status st = c.Reduce(a.data(), b.data(), 4, DataType::kFloat32, ReduceOp::kSum, 2);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("root 2"), std::string::npos);
    st = c.AllReduce(nullptr, b.data(), 4, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    st = c.AllReduce(a.data(), a.data() + 2, 4, DataType::kFloat32, ReduceOp::kSum);  // partial overlap
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    st = c.Send(a.data(), 1, DataType::kFloat32, r);  // to self
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    Work w = c.AllToAllVAsync(a.data(), {1}, {0}, b.data(), {1}, {0}, DataType::kFloat32);
    EXPECT_EQ(w.Wait().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(c.health().ok());
    float one = 1, sum = 0;
    ASSERT_TRUE(c.AllReduce(&one, &sum, 1, DataType::kFloat32, ReduceOp::kSum).ok());
    EXPECT_EQ(sum, 2.0f);
  });
}

TEST(Communicator, RankThatNeverJoinsFailsCreateNamingIt) {
  auto store = MakeInMemoryStore();
  CommOptions o = TestOptions();
  o.timeout = std::chrono::milliseconds(300);
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // rank 2 of 3 never comes
    threads.emplace_back([&, r] { results[r] = Communicator::Create(store, r, 3, o).status(); });
  }
  const auto t0 = Clock::now();
  for (auto& t : threads) t.join();
  EXPECT_LT(Ms(t0), 5000);
  for (const Status& st : results) {
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("rank 2"), std::string::npos) << st.ToString();
  }
}

// Size thresholds choose paths every rank must take alike: ranks created
// with different ones fail Create, naming the setting.
TEST(Communicator, MismatchedDirectPathThresholdsFailCreate) {
  auto store = MakeInMemoryStore();
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommOptions o = TestOptions();
      o.timeout = std::chrono::milliseconds(3000);
      o.shm_alltoall_single_copy_bytes = r == 0 ? 1 << 20 : 0;
      results[r] = Communicator::Create(store, r, 2, o).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
    EXPECT_NE(st.ToString().find("TESSERA_SHM_ALLTOALL_SINGLE_COPY_KB"), std::string::npos) << st.ToString();
  }
}

TEST(Communicator, StalledPeerTimesOutNamingItOnEveryWaitingRank) {
  for (const char* algo : {"shm_direct", "ring"}) {
    CommOptions o = TestOptions(algo);
    o.timeout = std::chrono::milliseconds(400);
    std::atomic<bool> done{false};
    RunRanks(3, o, [&](int r, Communicator& c) {
      std::vector<float> x(1000, 1.0f);
      if (r == 2) {  // joins, then stalls instead of calling the collective
        while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return;
      }
      const auto t0 = Clock::now();
      Status st = c.AllReduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
      const double ms = Ms(t0);
      EXPECT_FALSE(st.ok());
      EXPECT_LT(ms, 3000) << st.ToString();
      EXPECT_NE(st.message().find("all_reduce"), std::string::npos) << st.ToString();
      // The rank that timed out first names rank 2; the other may instead
      // report that rank's abort, which names the stalled rank too.
      EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.ToString();
      // The communicator is broken from now on, and says so at once.
      const auto t1 = Clock::now();
      Status again = c.Barrier();
      EXPECT_FALSE(again.ok());
      EXPECT_LT(Ms(t1), 100);
      if (r == 0) done = true;
    });
  }
}

TEST(Communicator, AbortReturnsPromptlyAndFailsPeers) {
  RunRanks(3, TestOptions(), [&](int r, Communicator& c) {
    std::vector<float> x(1000, 1.0f);
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const auto t0 = Clock::now();
      c.Abort("test abort");
      EXPECT_LT(Ms(t0), 200);
      EXPECT_EQ(c.health().code(), StatusCode::kAborted);
      EXPECT_EQ(c.AllReduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum).code(),
                StatusCode::kAborted);
      return;
    }
    // Ranks 1 and 2 block in a collective rank 0 never joins; its abort frees them.
    const auto t0 = Clock::now();
    Status st = c.AllReduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
    EXPECT_NE(st.message().find("test abort"), std::string::npos) << st.ToString();
    EXPECT_LT(Ms(t0), 2000);
  });
}

TEST(Communicator, AbortFromAnotherThreadStopsQueuedWork) {
  RunRanks(2, TestOptions(), [&](int r, Communicator& c) {
    std::vector<float> x(1000, 1.0f);
    if (r == 1) return;  // never participates
    std::vector<Work> works;
    for (int k = 0; k < 10; ++k) works.push_back(c.AllReduceAsync(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum));
    EXPECT_FALSE(works[0].Test());
    EXPECT_EQ(works[0].Wait(std::chrono::milliseconds(20)).code(), StatusCode::kDeadlineExceeded);
    std::thread watchdog([&] { c.Abort("watchdog"); });
    const auto t0 = Clock::now();
    for (Work& w : works) { EXPECT_EQ(w.Wait().code(), StatusCode::kAborted); }
    EXPECT_LT(Ms(t0), 500);
    watchdog.join();
  });
}

TEST(Communicator, DescribeListsTransportAndChoices) {
  RunRanks(2, TestOptions(), [&](int r, Communicator& c) {
    if (r != 0) return;
    const std::string d = c.Describe();
    EXPECT_NE(d.find("transport shm"), std::string::npos) << d;
    EXPECT_NE(d.find("all_reduce"), std::string::npos) << d;
    CollectiveArgs a;
    a.kind = CollectiveKind::kAllReduce;
    a.count = 2;
    EXPECT_NE(c.ExplainChoice(a).find("cost model"), std::string::npos) << c.ExplainChoice(a);
  });
}

TEST(Communicator, HierarchicalAcrossTwoPretendHosts) {
  // 4 ranks, 2 "hosts" (host_override): shm inside each, tcp across.
  RunRanks(
      4,
      [](int r) {
        CommOptions o = TestOptions();
        o.host_override = r % 2 == 0 ? "hostA" : "hostB";  // non-contiguous placement
        return o;
      },
      [&](int r, Communicator& c) {
        ASSERT_EQ(c.transport_kind(), transport::TransportKind::kTcp);
        CollectiveArgs a;
        a.kind = CollectiveKind::kAllReduce;
        a.count = 1000;
        EXPECT_NE(c.ExplainChoice(a).find("hierarchical"), std::string::npos);
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
          for (size_t count : {size_t{1}, size_t{1031}, size_t{300000}}) {
            std::vector<float> x(count);
            for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(testing::InputValue(r, i, DataType::kFloat32, op));
            ASSERT_TRUE(c.AllReduce(x.data(), x.data(), count, DataType::kFloat32, op).ok());
            for (size_t i = 0; i < count; ++i) {
              ASSERT_TRUE(testing::Close(x[i], testing::Reference(4, i, DataType::kFloat32, op), DataType::kFloat32, op))
                  << i;
            }
          }
        }
        std::vector<int32_t> g(4 * 3), mine = {r, r * 10, r * 100};
        ASSERT_TRUE(c.AllGather(mine.data(), g.data(), 3, DataType::kInt32).ok());
        for (int j = 0; j < 4; ++j) { EXPECT_EQ(g[j * 3 + 1], j * 10); }
        std::vector<int32_t> rs_in(4 * 2), rs_out(2);
        for (int j = 0; j < 8; ++j) rs_in[j] = j + r;
        ASSERT_TRUE(c.ReduceScatter(rs_in.data(), rs_out.data(), 2, DataType::kInt32, ReduceOp::kSum).ok());
        EXPECT_EQ(rs_out[0], 4 * (2 * r) + 6);
        EXPECT_EQ(rs_out[1], 4 * (2 * r + 1) + 6);
        // Other collectives run flat over tcp.
        std::vector<int32_t> t(4 * 2), u(4 * 2);
        for (int j = 0; j < 8; ++j) t[j] = r * 100 + j;
        ASSERT_TRUE(c.AllToAll(t.data(), u.data(), 2, DataType::kInt32).ok());
        for (int j = 0; j < 4; ++j) { EXPECT_EQ(u[j * 2], j * 100 + 2 * r); }
      });
}

}  // namespace
}  // namespace tessera::comm

// Link-level recovery of the tcp transport, end to end: ranks as threads,
// each with its own Communicator over real TCP sockets (127.0.0.1), running
// all-reduce (ring), broadcast (binomial tree) and all-to-all (pairwise) of
// a few MiB while the frame fault hook (frame.h) corrupts or drops frames:
//   - a flipped bit in a frame is detected, the frame resent, results exact;
//   - a stream shut down mid-frame (on the connecting side and on the
//     accepting side; with one and with two data streams) is re-established
//     and resumed, results exact;
//   - corruption on every resend fails every rank within the timeout with
//     the root cause (DataLoss: checksum) -- no hang;
//   - checksums are on by default, and off still works.
// Each test is bounded by the communicators' timeout (20 s here).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/base/knobs.h"
#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/transport/tcp/frame.h"

namespace tessera::comm {
namespace {

using transport::tcp::FrameFault;
using transport::tcp::FrameHeader;
using transport::tcp::GetLinkStats;
using transport::tcp::LinkStats;
using transport::tcp::SetFrameFaultHookForTesting;
using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 8;
std::atomic<int> g_faults_left[kMaxRanks];  // per sending rank
std::atomic<FrameFault> g_fault{FrameFault::kNone};

// Applies g_fault to the next g_faults_left[rank] frames of at least 4 KiB
// that `rank` sends.
FrameFault Hook(int rank, int, int, const FrameHeader& h) {
  if (rank < 0 || rank >= kMaxRanks || h.payload_bytes < 4096) return FrameFault::kNone;
  return g_faults_left[rank].fetch_sub(1) > 0 ? g_fault.load() : FrameFault::kNone;
}

struct FaultGuard {
  FaultGuard(FrameFault fault, std::vector<int> per_rank) {
    for (int r = 0; r < kMaxRanks; ++r) g_faults_left[r] = r < static_cast<int>(per_rank.size()) ? per_rank[r] : 0;
    g_fault = fault;
    SetFrameFaultHookForTesting(&Hook);
  }
  ~FaultGuard() { SetFrameFaultHookForTesting(nullptr); }
};

CommOptions TcpOptions(int checksum = -1, int streams = 0) {
  CommOptions o = testing::TestOptions("all_reduce=ring,broadcast=binomial_tree,all_to_all=pairwise");
  o.transport = transport::TransportKind::kTcp;
  o.tcp_checksum = checksum;
  o.tcp_streams = streams;
  o.timeout = std::chrono::milliseconds(20000);
  return o;
}

// A few MiB of all-reduce, broadcast and all-to-all, checked exactly.
void Collectives(int r, int n, Communicator& c) {
  const size_t count = (3 << 20) / sizeof(int32_t) + 7;
  std::vector<int32_t> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = r + static_cast<int32_t>(i % 17);
  Status st = c.AllReduce(x.data(), x.data(), count, DataType::kInt32, ReduceOp::kSum);
  ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.ToString();
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(x[i], n * (n - 1) / 2 + n * static_cast<int32_t>(i % 17)) << "all_reduce rank " << r << " i " << i;
  }
  const int root = 1 % n;
  std::vector<int32_t> b(count);
  for (size_t i = 0; i < count; ++i) b[i] = r == root ? static_cast<int32_t>(i * 3) : -1;
  st = c.Broadcast(b.data(), b.data(), count, DataType::kInt32, root);
  ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.ToString();
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], static_cast<int32_t>(i * 3)) << "broadcast rank " << r;
  const size_t m = (4 << 20) / sizeof(int32_t) / n;  // per peer
  std::vector<int32_t> send(m * n), recv(m * n, -1);
  for (size_t k = 0; k < m * n; ++k) send[k] = r * 1000003 + static_cast<int32_t>(k);
  st = c.AllToAll(send.data(), recv.data(), m, DataType::kInt32);
  ASSERT_TRUE(st.ok()) << "rank " << r << ": " << st.ToString();
  for (int j = 0; j < n; ++j) {
    for (size_t k = 0; k < m; ++k) {
      ASSERT_EQ(recv[j * m + k], j * 1000003 + static_cast<int32_t>(r * m + k)) << "all_to_all rank " << r;
    }
  }
}

TEST(TcpLinkRecovery, FlippedBitIsDetectedAndResent) {
  constexpr int n = 3;
  const LinkStats before = GetLinkStats();
  {
    FaultGuard fault(FrameFault::kFlipBit, {1, 1, 1});  // one frame from every rank
    testing::RunRanks(n, TcpOptions(), [&](int r, Communicator& c) { Collectives(r, n, c); });
  }
  const LinkStats after = GetLinkStats();
  EXPECT_GE(after.corrupt_frames - before.corrupt_frames, 3u);
  EXPECT_GE(after.retransmits - before.retransmits, 3u);
}

TEST(TcpLinkRecovery, DroppedStreamIsReestablishedAndResumed) {
  constexpr int n = 3;
  for (int streams : {1, 2}) {
    const LinkStats before = GetLinkStats();
    {
      // Rank 0 accepts every pair's streams, rank 2 connects every one: a
      // stream dropped by the accepting side and one by the connecting side.
      FaultGuard fault(FrameFault::kShutdownStream, {1, 0, 1});
      testing::RunRanks(n, TcpOptions(-1, streams), [&](int r, Communicator& c) { Collectives(r, n, c); });
    }
    const LinkStats after = GetLinkStats();
    EXPECT_GE(after.reconnects - before.reconnects, 4u) << streams << " stream(s)";  // 2 drops, both sides count
    EXPECT_GE(after.resent_frames - before.resent_frames, 2u) << streams << " stream(s)";
  }
}

TEST(TcpLinkRecovery, CorruptionOnEveryResendFailsEveryRankWithinTheTimeout) {
  constexpr int n = 3;
  std::mutex mu;
  std::vector<Status> results(n);
  std::vector<double> seconds(n);
  {
    FaultGuard fault(FrameFault::kFlipBit, {0, 1000000, 0});  // every frame rank 1 sends
    testing::RunRanks(n, TcpOptions(), [&](int r, Communicator& c) {
      std::vector<float> x((2 << 20) / sizeof(float), 1.0f);
      const auto t0 = Clock::now();
      Status st = c.AllReduce(x.data(), x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum);
      std::lock_guard<std::mutex> lock(mu);
      results[r] = st;
      seconds[r] = std::chrono::duration<double>(Clock::now() - t0).count();
    });
  }
  int data_loss = 0;
  for (int r = 0; r < n; ++r) {
    ASSERT_FALSE(results[r].ok()) << "rank " << r;
    EXPECT_LT(seconds[r], 15.0) << "rank " << r << ": " << results[r].ToString();  // well inside the 20 s timeout
    EXPECT_NE(results[r].message().find("checksum"), std::string::npos) << "rank " << r << ": " << results[r].ToString();
    data_loss += results[r].code() == StatusCode::kDataLoss;
  }
  // The receiver of rank 1's frames gives up after the resends; rank 1 hears why.
  EXPECT_GE(data_loss, 2);
  EXPECT_EQ(results[1].code(), StatusCode::kDataLoss) << results[1].ToString();
  EXPECT_NE(results[1].message().find("could not receive a frame from this rank intact"), std::string::npos)
      << results[1].ToString();
}

TEST(TcpLinkRecovery, ChecksumsOnByDefaultAndOffStillWorks) {
  bool found = false;
  for (const base::KnobBase* k : base::AllKnobs()) {
    if (k->name() != std::string("TESSERA_TCP_CHECKSUM")) continue;
    found = true;
    EXPECT_EQ(k->default_text(), "1");
  }
  EXPECT_TRUE(found);
  constexpr int n = 2;
  const LinkStats before = GetLinkStats();
  testing::RunRanks(n, TcpOptions(/*checksum=*/0), [&](int r, Communicator& c) { Collectives(r, n, c); });
  EXPECT_EQ(GetLinkStats().corrupt_frames, before.corrupt_frames);
}

}  // namespace
}  // namespace tessera::comm

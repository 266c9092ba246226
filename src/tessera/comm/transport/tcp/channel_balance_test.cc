// Dynamic load balancing over tcp streams: one of four streams is slowed
// (test-only pace hook, frame.h) to a rate at which a static striping of the
// message (a quarter of the chunks per stream) would need over a second;
// the dynamic assignment moves the chunks to the other streams, so the
// slow stream carries a small share and the transfer ends far sooner.
// (Which of the fast streams carry the rest does not matter: a stream
// keeps taking chunks while its socket accepts them.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "tessera/comm/api/comm_test_util.h"
#include "tessera/comm/transport/tcp/frame.h"

namespace tessera::comm {
namespace {

using testing::RunRanks;
using testing::TestOptions;
using transport::tcp::GetLinkStats;
using transport::tcp::LinkStats;

constexpr double kSlowRate = 8e6;  // bytes per second on the slowed stream
constexpr int kStreams = 4;

double SlowStreamZero(int, int, int stream) { return stream == 0 ? kSlowRate : 0.0; }

struct PaceGuard {
  PaceGuard() { transport::tcp::SetStreamPaceHookForTesting(&SlowStreamZero); }
  ~PaceGuard() { transport::tcp::SetStreamPaceHookForTesting(nullptr); }
};

TEST(TcpChannelBalance, SlowStreamCarriesLess) {
  const size_t bytes = 48u << 20;
  CommOptions o = TestOptions("", "balance");
  o.transport = transport::TransportKind::kTcp;
  o.tcp_streams = kStreams;
  std::vector<double> seconds(2);
  LinkStats before = GetLinkStats();
  {
    PaceGuard pace;
    RunRanks(2, o, [&](int rank, Communicator& comm) {
      std::vector<uint8_t> buf(bytes);
      for (size_t i = 0; i < bytes; i += 4096) buf[i] = rank == 0 ? static_cast<uint8_t>(i >> 12) : 0;
      ASSERT_TRUE(comm.Barrier().ok());
      const auto t0 = std::chrono::steady_clock::now();
      Status st = rank == 0 ? comm.Send(buf.data(), bytes, DataType::kUint8, 1)
                            : comm.Recv(buf.data(), bytes, DataType::kUint8, 0);
      ASSERT_TRUE(st.ok()) << st.ToString();
      seconds[rank] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rank == 1) {
        for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(buf[i], static_cast<uint8_t>(i >> 12)) << "byte " << i;
      }
    });
  }
  const LinkStats after = GetLinkStats();
  std::vector<uint64_t> per_stream(kStreams);
  uint64_t total = 0;
  for (int s = 0; s < kStreams; ++s) {
    per_stream[s] = after.stream_bytes[s] - before.stream_bytes[s];
    total += per_stream[s];
  }
  ASSERT_GE(total, bytes);  // every chunk went over some stream (plus headers, setup messages)
  const double slow_share = static_cast<double>(per_stream[0]) / static_cast<double>(total);
  // A static striping sends a quarter of the bytes at kSlowRate.
  const double static_seconds = static_cast<double>(bytes) / kStreams / kSlowRate;
  std::printf("tcp balance: %zu MiB in %.3f s; stream bytes %llu %llu %llu %llu (slow share %.3f); static striping "
              "would need >= %.2f s\n",
              bytes >> 20, seconds[1], static_cast<unsigned long long>(per_stream[0]),
              static_cast<unsigned long long>(per_stream[1]), static_cast<unsigned long long>(per_stream[2]),
              static_cast<unsigned long long>(per_stream[3]), slow_share, static_seconds);
  EXPECT_LT(slow_share, 0.10) << "the slowed stream should carry far less than its fair quarter";
  EXPECT_LT(seconds[1], 0.5 * static_seconds) << "the transfer waited on the slow stream";
}

}  // namespace
}  // namespace tessera::comm

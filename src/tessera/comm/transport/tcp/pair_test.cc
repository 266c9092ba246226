// tcp::Pair over socketpairs (data streams + control stream, no listener, so
// no reconnection): a peer that finished and closed its streams while its
// last frame is still in flight on another stream; closed streams; frames
// corrupted on the wire (flipped bit) are NACKed and resent, reductions
// applied once, and repeated corruption fails both sides with DataLoss;
// acknowledged vs eager sends; checksums off.
#include "tessera/comm/transport/tcp/pair.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <numeric>
#include <vector>

#include "tessera/base/checksum.h"

namespace tessera::comm::transport::tcp {
namespace {

struct Streams {
  std::vector<int> a, b;  // a[i] and b[i] are the two ends of stream i (the last: control)
};

Streams MakeStreams(int n) {
  Streams s;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    for (int fd : fds) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    s.a.push_back(fds[0]);
    s.b.push_back(fds[1]);
  }
  return s;
}

Pair::Config Cfg(size_t chunk, bool checksum, int rank) {
  Pair::Config c;
  c.chunk_bytes = chunk;
  c.checksum = checksum;
  c.endpoint.rank = rank;  // no address: no reconnection
  return c;
}

OpContext Ctx() {
  OpContext c;
  c.label = "pair test";
  return c;
}

// Drives `pair` until `op` completes or Progress fails; at most `rounds`.
Status Drive(Pair& pair, const P2pOp& op, int rounds = 1000) {
  const OpContext ctx = Ctx();
  for (int i = 0; i < rounds && !op.complete; ++i) {
    StatusOr<bool> r = pair.Progress(ctx);
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

// Drives both pairs until all `ops` complete or one fails (its status; the
// other side is driven a little longer so it sees the consequence).
struct BothResult {
  Status a, b;
};
BothResult DriveBoth(Pair& a, Pair& b, const std::vector<const P2pOp*>& ops, int rounds = 200000) {
  const OpContext ctx = Ctx();
  BothResult res;
  for (int i = 0; i < rounds; ++i) {
    bool done = true;
    for (const P2pOp* op : ops) done = done && op->complete;
    if (done && i > 0) break;
    if (res.a.ok()) {
      StatusOr<bool> r = a.Progress(ctx);
      if (!r.ok()) res.a = r.status();
    }
    if (res.b.ok()) {
      StatusOr<bool> r = b.Progress(ctx);
      if (!r.ok()) res.b = r.status();
    }
    if (!res.a.ok() && !res.b.ok()) break;
  }
  return res;
}

std::atomic<int> g_flips{0};      // frames left to corrupt
std::atomic<int> g_from_rank{-1};  // only frames sent by this rank
std::atomic<uint64_t> g_offset{~0ull};  // only frames at this offset (all: ~0)

FrameFault FlipHook(int rank, int, int, const FrameHeader& h) {
  if (rank != g_from_rank.load() || h.payload_bytes == 0) return FrameFault::kNone;
  if (g_offset.load() != ~0ull && h.offset != g_offset.load()) return FrameFault::kNone;
  return g_flips.fetch_sub(1) > 0 ? FrameFault::kFlipBit : FrameFault::kNone;
}

struct HookGuard {
  HookGuard(int from_rank, int flips, uint64_t offset = ~0ull) {
    g_from_rank = from_rank;
    g_flips = flips;
    g_offset = offset;
    SetFrameFaultHookForTesting(&FlipHook);
  }
  ~HookGuard() { SetFrameFaultHookForTesting(nullptr); }
};

TEST(TcpPair, StreamClosedBetweenFramesIsNotAnErrorWhileOthersCarryData) {
  Streams s = MakeStreams(3);  // data 0, data 1, control
  Pair receiver(0, s.b, Cfg(4096, true, 1), "rank 0");
  std::vector<uint8_t> payload(3000), got(3000, 0);
  std::iota(payload.begin(), payload.end(), 0);
  P2pOp recv = P2pOp::Recv(0, 7, got.data(), got.size());
  receiver.Post(&recv);
  {
    // The sender closes stream 1 first (it finished), its frame on stream 0
    // not sent yet: the receiver sees the end of stream 1 before any data.
    close(s.a[1]);
    ASSERT_TRUE(Drive(receiver, recv, 5).ok());
    EXPECT_FALSE(recv.complete);
    Pair sender(1, {s.a[0], s.a[2]}, Cfg(4096, true, 0), "rank 1");
    P2pOp send = P2pOp::Send(1, 7, payload.data(), payload.size());
    sender.Post(&send);
    ASSERT_TRUE(Drive(sender, send).ok());
    ASSERT_TRUE(send.complete);  // small: complete once written
  }  // the sender's pair closes stream 0 and the control stream
  Status st = Drive(receiver, recv);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(recv.complete);
  EXPECT_EQ(got, payload);
}

TEST(TcpPair, ReceiveFailsOnceEveryStreamClosed) {
  Streams s = MakeStreams(3);
  Pair receiver(0, s.b, Cfg(4096, true, 1), "rank 0 (host h)");
  std::vector<uint8_t> got(100);
  P2pOp recv = P2pOp::Recv(0, 1, got.data(), got.size());
  receiver.Post(&recv);
  for (int fd : s.a) close(fd);
  Status st = Drive(receiver, recv);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 0 (host h) closed the connection"), std::string::npos) << st.ToString();
  // A receive posted afterwards fails at once too (no wait for the deadline).
  P2pOp again = P2pOp::Recv(0, 2, got.data(), got.size());
  receiver.Post(&again);
  EXPECT_FALSE(Drive(receiver, again, 1).ok());
}

TEST(TcpPair, StreamClosedMidFrameWithNoWayToReconnectIsAnError) {
  Streams s = MakeStreams(3);
  Pair receiver(0, s.b, Cfg(4096, true, 1), "rank 0");
  std::vector<uint8_t> got(100);
  P2pOp recv = P2pOp::Recv(0, 1, got.data(), got.size());
  receiver.Post(&recv);
  const uint8_t partial_header[5] = {1, 2, 3, 4, 5};
  ASSERT_EQ(write(s.a[0], partial_header, sizeof(partial_header)), 5);
  close(s.a[0]);
  Status st = Drive(receiver, recv);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  close(s.a[1]);
  close(s.a[2]);
}

// 1 MiB in 64 KiB frames, one frame corrupted on the wire: resent, the data
// arrives intact, the send completes once acknowledged.
TEST(TcpPair, FlippedBitIsDetectedAndTheFrameResent) {
  for (bool reduce : {false, true}) {
    Streams s = MakeStreams(3);
    Pair a(1, s.a, Cfg(64 << 10, true, 0), "rank 1");
    Pair b(0, s.b, Cfg(64 << 10, true, 1), "rank 0");
    const size_t n = (1 << 20) / sizeof(float);
    std::vector<float> x(n), y(n, 1.0f);
    for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000);
    P2pOp send = P2pOp::Send(1, 3, x.data(), n * sizeof(float));
    P2pOp recv = reduce ? P2pOp::RecvReduce(0, 3, y.data(), n * sizeof(float), DataType::kFloat32, ReduceOp::kSum)
                        : P2pOp::Recv(0, 3, y.data(), n * sizeof(float));
    const LinkStats before = GetLinkStats();
    {
      HookGuard hook(/*from_rank=*/0, /*flips=*/1, /*offset=*/3 * (64 << 10));
      a.Post(&send);
      b.Post(&recv);
      BothResult r = DriveBoth(a, b, {&send, &recv});
      ASSERT_TRUE(r.a.ok()) << r.a.ToString();
      ASSERT_TRUE(r.b.ok()) << r.b.ToString();
    }
    ASSERT_TRUE(send.complete && recv.complete);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] + (reduce ? 1.0f : 0.0f)) << i;
    const LinkStats after = GetLinkStats();
    EXPECT_GE(after.corrupt_frames - before.corrupt_frames, 1u);
    EXPECT_GE(after.retransmits - before.retransmits, 1u);
  }
}

TEST(TcpPair, CorruptionBeyondTheRetryLimitFailsBothSidesWithDataLoss) {
  Streams s = MakeStreams(3);
  Pair a(1, s.a, Cfg(64 << 10, true, 0), "rank 1");
  Pair b(0, s.b, Cfg(64 << 10, true, 1), "rank 0");
  std::vector<uint8_t> x(256 << 10, 7), y(256 << 10);
  P2pOp send = P2pOp::Send(1, 3, x.data(), x.size());
  P2pOp recv = P2pOp::Recv(0, 3, y.data(), y.size());
  HookGuard hook(/*from_rank=*/0, /*flips=*/1000, /*offset=*/128 << 10);
  a.Post(&send);
  b.Post(&recv);
  BothResult r = DriveBoth(a, b, {&send, &recv});
  ASSERT_FALSE(r.b.ok());
  EXPECT_EQ(r.b.code(), StatusCode::kDataLoss) << r.b.ToString();
  EXPECT_NE(r.b.message().find("rank 0 (stream"), std::string::npos) << r.b.ToString();
  EXPECT_NE(r.b.message().find("at offset 131072"), std::string::npos) << r.b.ToString();
  EXPECT_NE(r.b.message().find("failed its checksum 9 times"), std::string::npos) << r.b.ToString();
  ASSERT_FALSE(r.a.ok());
  EXPECT_EQ(r.a.code(), StatusCode::kDataLoss) << r.a.ToString();
  EXPECT_NE(r.a.message().find("rank 1 could not receive"), std::string::npos) << r.a.ToString();
  EXPECT_FALSE(send.complete);
}

TEST(TcpPair, LargeSendsCompleteWhenAcknowledgedSmallOnesWhenWritten) {
  Streams s = MakeStreams(3);
  Pair a(1, s.a, Cfg(64 << 10, true, 0), "rank 1");
  Pair b(0, s.b, Cfg(64 << 10, true, 1), "rank 0");
  std::vector<uint8_t> big(kEagerBytes + 1, 1), small(kEagerBytes, 2), got_big(big.size()), got_small(small.size());
  P2pOp send_big = P2pOp::Send(1, 1, big.data(), big.size());
  a.Post(&send_big);
  ASSERT_TRUE(Drive(a, send_big, 200).ok());
  EXPECT_FALSE(send_big.complete);  // written, not acknowledged: the receive is not posted
  // Both sides send a small message before receiving: no deadlock.
  P2pOp send_small = P2pOp::Send(0, 2, small.data(), small.size());
  b.Post(&send_small);
  ASSERT_TRUE(Drive(b, send_small, 200).ok());
  EXPECT_TRUE(send_small.complete);
  P2pOp recv_big = P2pOp::Recv(0, 1, got_big.data(), got_big.size());
  P2pOp recv_small = P2pOp::Recv(1, 2, got_small.data(), got_small.size());
  b.Post(&recv_big);
  a.Post(&recv_small);
  BothResult r = DriveBoth(a, b, {&send_big, &recv_big, &recv_small});
  ASSERT_TRUE(r.a.ok() && r.b.ok()) << r.a.ToString() << r.b.ToString();
  EXPECT_TRUE(send_big.complete);
  EXPECT_EQ(got_big, big);
  EXPECT_EQ(got_small, small);
}

// The inline frame checksum is plain XXH3-64 (base::Checksum64, xxhsum -H3).
TEST(TcpPair, FrameChecksumIsXxh3) {
  std::vector<uint8_t> v(300001);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i * 131 + 7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{17}, size_t{240}, size_t{4096}, v.size()}) {
    EXPECT_EQ(FrameChecksum(v.data(), n), base::Checksum64(v.data(), n)) << n;
  }
}

TEST(TcpPair, ChecksumsOffStillDeliver) {
  Streams s = MakeStreams(2);  // one data stream + control
  Pair a(1, s.a, Cfg(16 << 10, false, 0), "rank 1");
  Pair b(0, s.b, Cfg(16 << 10, false, 1), "rank 0");
  std::vector<uint8_t> x(300000), y(x.size());
  std::iota(x.begin(), x.end(), 0);
  P2pOp send = P2pOp::Send(1, 9, x.data(), x.size());
  P2pOp recv = P2pOp::Recv(0, 9, y.data(), y.size());
  const LinkStats before = GetLinkStats();
  a.Post(&send);
  b.Post(&recv);
  BothResult r = DriveBoth(a, b, {&send, &recv});
  ASSERT_TRUE(r.a.ok() && r.b.ok()) << r.a.ToString() << r.b.ToString();
  EXPECT_EQ(x, y);
  EXPECT_EQ(GetLinkStats().corrupt_frames, before.corrupt_frames);
}

}  // namespace
}  // namespace tessera::comm::transport::tcp

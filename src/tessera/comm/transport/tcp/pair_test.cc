// tcp::Pair over socketpairs: a peer that finished and closed its streams
// while its last frame is still in flight on another stream.
#include "tessera/comm/transport/tcp/pair.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <numeric>
#include <vector>

namespace tessera::comm::transport::tcp {
namespace {

struct Streams {
  std::vector<int> a, b;  // a[i] and b[i] are the two ends of stream i
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

TEST(TcpPair, StreamClosedBetweenFramesIsNotAnErrorWhileOthersCarryData) {
  Streams s = MakeStreams(2);
  Pair receiver(0, s.b, 4096, false, "rank 0");
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
    Pair sender(1, {s.a[0]}, 4096, false, "rank 1");
    P2pOp send = P2pOp::Send(1, 7, payload.data(), payload.size());
    sender.Post(&send);
    ASSERT_TRUE(Drive(sender, send).ok());
    ASSERT_TRUE(send.complete);
  }  // the sender's pair closes stream 0
  Status st = Drive(receiver, recv);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(recv.complete);
  EXPECT_EQ(got, payload);
}

TEST(TcpPair, ReceiveFailsOnceEveryStreamClosed) {
  Streams s = MakeStreams(2);
  Pair receiver(0, s.b, 4096, false, "rank 0 (host h)");
  std::vector<uint8_t> got(100);
  P2pOp recv = P2pOp::Recv(0, 1, got.data(), got.size());
  receiver.Post(&recv);
  close(s.a[0]);
  close(s.a[1]);
  Status st = Drive(receiver, recv);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("rank 0 (host h) closed the connection"), std::string::npos) << st.ToString();
  // A receive posted afterwards fails at once too (no wait for the deadline).
  P2pOp again = P2pOp::Recv(0, 2, got.data(), got.size());
  receiver.Post(&again);
  EXPECT_FALSE(Drive(receiver, again, 1).ok());
}

TEST(TcpPair, StreamClosedMidFrameIsAnError) {
  Streams s = MakeStreams(2);
  Pair receiver(0, s.b, 4096, false, "rank 0");
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
}

}  // namespace
}  // namespace tessera::comm::transport::tcp

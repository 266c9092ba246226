// TCP store: semantics across threads and clients, authentication (right
// token accepted; wrong, missing or forged proofs refused), frame limits,
// connect retries and bounded failures when the server is absent or stops.
#include "tessera/comm/tcp_store.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/comm/auth.h"
#include "tessera/comm/store_wire.h"

namespace tessera::comm {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

std::string Token() { return GenerateJobToken().value(); }

TcpStoreClientOptions Quick() {
  TcpStoreClientOptions o;
  o.connect_timeout = milliseconds(5000);
  o.op_timeout = milliseconds(5000);
  return o;
}

bool Contains(const Status& st, const std::string& text) { return st.ToString().find(text) != std::string::npos; }

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = Token();
    server_ = std::make_unique<TcpStoreServer>(token_, server_options_);
    auto port = server_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
    ASSERT_GT(port_, 0);
  }
  std::shared_ptr<TcpStoreClient> Client(TcpStoreClientOptions o = Quick()) {
    auto c = TcpStoreClient::Connect("127.0.0.1", port_, token_, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  }

  TcpStoreServerOptions server_options_;
  std::string token_;
  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
};

TEST_F(TcpStoreTest, SetGetAddDeleteRoundTrip) {
  auto c = Client();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Address(), "tcp://127.0.0.1:" + std::to_string(port_));
  Bytes binary = {0, 255, 10, 13, 0};
  ASSERT_TRUE(c->Set("bin", binary).ok());
  EXPECT_EQ(*c->Get("bin", milliseconds(0)), binary);
  ASSERT_TRUE(c->Set("empty", {}).ok());
  EXPECT_EQ(c->Get("empty", milliseconds(0))->size(), 0u);
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131);
  ASSERT_TRUE(c->Set("big", big).ok());
  EXPECT_EQ(*c->Get("big", milliseconds(0)), big);
  EXPECT_EQ(*c->Add("n", 5), 5);
  EXPECT_EQ(*c->Add("n", -7), -2);
  EXPECT_EQ(*c->GetString("n", milliseconds(0)), "-2");
  auto bad = c->Add("bin", 1);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status(), "'bin'"));
  ASSERT_TRUE(c->Delete("bin").ok());
  ASSERT_TRUE(c->Delete("bin").ok());
  EXPECT_EQ(c->Get("bin", milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  // The connection is still usable after error replies.
  EXPECT_EQ(*c->Add("n", 2), 0);
}

TEST_F(TcpStoreTest, GetTimeoutNamesStoreKeyAndWait) {
  auto c = Client();
  auto t0 = steady_clock::now();
  auto got = c->Get("rank7/addr", milliseconds(100));
  auto waited = steady_clock::now() - t0;
  ASSERT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status().ToString();
  EXPECT_TRUE(Contains(got.status(), "rank7/addr"));
  EXPECT_TRUE(Contains(got.status(), "100 ms"));
  EXPECT_TRUE(Contains(got.status(), c->Address()));
  EXPECT_GE(waited, milliseconds(100));
  EXPECT_LT(waited, milliseconds(5000));
  Status w = c->Wait({"x", "y"}, milliseconds(20));
  ASSERT_EQ(w.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(w, "'x', 'y'"));
}

TEST_F(TcpStoreTest, ClientsAsRanksRendezvousAcrossThreads) {
  constexpr int kWorld = 6;
  std::vector<std::thread> threads;
  std::vector<std::string> seen(kWorld);
  std::vector<Status> errors(kWorld);
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      auto c = TcpStoreClient::Connect("127.0.0.1", port_, token_, Quick());
      if (!c.ok()) {
        errors[r] = c.status();
        return;
      }
      Store& s = **c;
      Status st = s.SetString("addr/" + std::to_string(r), "host-" + std::to_string(r));
      if (st.ok()) st = StoreBarrier(s, "b", kWorld, milliseconds(10000));
      // After the barrier every key is present: read the neighbour's.
      if (st.ok()) {
        auto v = s.GetString("addr/" + std::to_string((r + 1) % kWorld), milliseconds(0));
        if (v.ok()) seen[r] = *v; else st = v.status();
      }
      errors[r] = st;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r].ToString();
    EXPECT_EQ(seen[r], "host-" + std::to_string((r + 1) % kWorld));
  }
  EXPECT_EQ(server_->refused_connections(), 0);
}

TEST_F(TcpStoreTest, OneClientSharedByThreadsWaitsConcurrently) {
  auto c = Client();
  // Thread A blocks in Get while thread B's Set must still go through.
  std::thread waiter([&] {
    auto v = c->GetString("late", milliseconds(10000));
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    if (v.ok()) {
      EXPECT_EQ(*v, "here");
    }
  });
  std::this_thread::sleep_for(milliseconds(50));
  ASSERT_TRUE(c->SetString("late", "here").ok());
  waiter.join();
  std::vector<std::thread> adders;
  for (int t = 0; t < 4; ++t) {
    adders.emplace_back([&] {
      for (int i = 0; i < 200; ++i) ASSERT_TRUE(c->Add("ctr", 1).ok());
    });
  }
  for (auto& t : adders) t.join();
  EXPECT_EQ(*c->Add("ctr", 0), 800);
}

TEST_F(TcpStoreTest, WrongTokenIsRefusedRightTokenAccepted) {
  auto t0 = steady_clock::now();
  auto bad = TcpStoreClient::Connect("127.0.0.1", port_, Token(), Quick());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition) << bad.status().ToString();
  EXPECT_TRUE(Contains(bad.status(), "refused")) << bad.status().ToString();
  EXPECT_TRUE(Contains(bad.status(), "TESSERA_JOB_TOKEN"));
  // A refusal is definitive: no retrying until the connect timeout.
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(server_->refused_connections(), 1);

  auto good = Client();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->SetString("k", "v").ok());
  EXPECT_EQ(server_->refused_connections(), 1);
  EXPECT_GE(server_->accepted_connections(), 1);
}

TEST_F(TcpStoreTest, RawConnectionsWithoutProofAreRefused) {
  const auto deadline = steady_clock::now() + milliseconds(5000);
  // 1) A forged proof (right format, wrong MAC).
  {
    int fd = wire::ConnectOnce("127.0.0.1", port_, deadline).value();
    Bytes hello;
    ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &hello, "hello").ok());
    Bytes nonce(kNonceBytes, 7), proof(kMacBytes, 9);
    wire::Writer w;
    w.U32(wire::kMagic).U8(wire::kVersion).Blob(nonce).Str("forger").Blob(proof);
    ASSERT_TRUE(wire::SendAll(fd, w.Frame(), deadline, "auth").ok());
    Bytes reply;
    ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &reply, "reply").ok());
    EXPECT_EQ(reply.at(0), 1);  // refused
    Bytes more;
    EXPECT_EQ(wire::RecvFrame(fd, 1024, deadline, &more, "eof").code(), StatusCode::kUnavailable);
    ::close(fd);
  }
  // 2) Not even the magic: a request sent as if authenticated.
  {
    int fd = wire::ConnectOnce("127.0.0.1", port_, deadline).value();
    wire::Writer w;
    w.U32(1).U8(static_cast<uint8_t>(wire::Op::kGet)).Str("secret").U64(0);
    ASSERT_TRUE(wire::SendAll(fd, w.Frame(), deadline, "req").ok());
    Bytes frame;
    ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &frame, "hello").ok());  // HELLO
    ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &frame, "verdict").ok());
    EXPECT_EQ(frame.at(0), 1);
    ::close(fd);
  }
  // Both were refused; a legitimate client still works.
  auto deadline2 = steady_clock::now() + milliseconds(2000);
  while (server_->refused_connections() < 2 && steady_clock::now() < deadline2) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(server_->refused_connections(), 2);
  auto c = Client();
  EXPECT_TRUE(c->SetString("k", "v").ok());
}

TEST_F(TcpStoreTest, OversizeHandshakeFrameClosesConnection) {
  const auto deadline = steady_clock::now() + milliseconds(5000);
  int fd = wire::ConnectOnce("127.0.0.1", port_, deadline).value();
  Bytes hello;
  ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &hello, "hello").ok());
  const uint8_t header[4] = {0x7f, 0xff, 0xff, 0xff};  // claims 2 GiB
  ASSERT_EQ(::send(fd, header, 4, MSG_NOSIGNAL), 4);
  Bytes reply;
  // The server answers "refused" and closes without waiting for the body.
  Status st = wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &reply, "verdict");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(reply.at(0), 1);
  EXPECT_EQ(wire::RecvFrame(fd, 1024, deadline, &reply, "eof").code(), StatusCode::kUnavailable);
  ::close(fd);
  EXPECT_EQ(server_->refused_connections(), 1);
}

class SmallFrameStoreTest : public TcpStoreTest {
 protected:
  void SetUp() override {
    server_options_.max_frame_bytes = 1024;
    TcpStoreTest::SetUp();
  }
};

TEST_F(SmallFrameStoreTest, OversizeRequestRejected) {
  // The client knows the limit: rejected locally, naming key and sizes.
  TcpStoreClientOptions small = Quick();
  small.max_frame_bytes = 1024;
  auto c = Client(small);
  Status local = c->Set("blob", Bytes(4096));
  EXPECT_EQ(local.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(local, "'blob'")) << local.ToString();
  EXPECT_TRUE(Contains(local, "1024")) << local.ToString();
  EXPECT_TRUE(c->SetString("ok", "fine").ok());
  // A client configured with a larger limit is cut off by the server.
  auto big = Client();
  Status remote = big->Set("blob", Bytes(4096));
  EXPECT_FALSE(remote.ok());
  EXPECT_TRUE(Contains(remote, big->Address())) << remote.ToString();
  EXPECT_EQ(server_->refused_connections(), 1);
  // The server still serves everyone else.
  EXPECT_EQ(*c->GetString("ok", milliseconds(0)), "fine");
}

TEST_F(TcpStoreTest, SilentConnectionDroppedAfterAuthTimeout) {
  server_->Stop();
  server_options_.auth_timeout = milliseconds(100);
  SetUp();
  const auto deadline = steady_clock::now() + milliseconds(5000);
  int fd = wire::ConnectOnce("127.0.0.1", port_, deadline).value();
  Bytes frame;
  ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &frame, "hello").ok());
  ASSERT_TRUE(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &frame, "verdict").ok());
  EXPECT_EQ(frame.at(0), 1);
  ::close(fd);
  EXPECT_EQ(server_->refused_connections(), 1);
}

TEST(TcpStoreClient, ConnectRetriesUntilServerStarts) {
  // Reserve a free port, release it, start the server there later.
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  ::close(probe);

  const std::string token = Token();
  TcpStoreServer server(token);
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto p = server.Start("127.0.0.1", port);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
  });
  auto c = TcpStoreClient::Connect("127.0.0.1", port, token, Quick());
  starter.join();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->SetString("k", "v").ok());
}

TEST(TcpStoreClient, ConnectTimesOutWhenNobodyListens) {
  TcpStoreServer server(Token());
  int port = server.Start("127.0.0.1", 0).value();
  server.Stop();  // the port is now closed
  TcpStoreClientOptions o = Quick();
  o.connect_timeout = milliseconds(300);
  auto t0 = steady_clock::now();
  auto c = TcpStoreClient::Connect("127.0.0.1", port, Token(), o);
  auto took = steady_clock::now() - t0;
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(c.status(), "127.0.0.1:" + std::to_string(port))) << c.status().ToString();
  EXPECT_TRUE(Contains(c.status(), "300 ms"));
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(3000));
}

TEST(TcpStoreClient, DetectsServerWithoutTheToken) {
  // A fake server that accepts anything and answers with a bogus proof.
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::thread fake([&] {
    int fd = ::accept(lfd, nullptr, nullptr);
    const auto deadline = steady_clock::now() + milliseconds(5000);
    wire::SendAll(fd, wire::Writer().U32(wire::kMagic).U8(wire::kVersion).Blob(Bytes(kNonceBytes, 1)).Frame(),
                  deadline, "hello")
        .ok();
    Bytes auth;
    wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &auth, "auth").ok();
    wire::SendAll(fd, wire::Writer().U8(0).Blob(Bytes(kMacBytes, 2)).Frame(), deadline, "ok").ok();
    ::close(fd);
  });
  auto c = TcpStoreClient::Connect("127.0.0.1", ntohs(addr.sin_port), Token(), Quick());
  fake.join();
  ::close(lfd);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(c.status(), "could not prove")) << c.status().ToString();
}

TEST_F(TcpStoreTest, ServerStopFailsPendingAndLaterCallsPromptly) {
  auto c = Client();
  std::atomic<bool> done{false};
  Status pending;
  std::thread waiter([&] {
    pending = c->Get("never", milliseconds(60000)).status();
    done = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  auto t0 = steady_clock::now();
  server_->Stop();
  waiter.join();
  EXPECT_LT(steady_clock::now() - t0, milliseconds(3000));
  EXPECT_EQ(pending.code(), StatusCode::kUnavailable) << pending.ToString();
  EXPECT_TRUE(Contains(pending, "'never'")) << pending.ToString();
  t0 = steady_clock::now();
  Status later = c->SetString("k", "v");
  EXPECT_EQ(later.code(), StatusCode::kUnavailable) << later.ToString();
  EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
}

TEST(TcpStoreServer, RejectsBadTokenAndPort) {
  TcpStoreServer short_token("abc");
  EXPECT_EQ(short_token.Start("127.0.0.1", 0).status().code(), StatusCode::kInvalidArgument);
  TcpStoreServer bad_port(Token());
  EXPECT_EQ(bad_port.Start("127.0.0.1", 70000).status().code(), StatusCode::kInvalidArgument);
  auto c = TcpStoreClient::Connect("127.0.0.1", 1, "short", Quick());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(TcpStoreServer, ListensOnAllInterfacesWithEmptyHost) {
  const std::string token = Token();
  TcpStoreServer server(token);
  auto port = server.Start("", 0);
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  auto c = TcpStoreClient::Connect("127.0.0.1", *port, token, Quick());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->SetString("k", "v").ok());
}

}  // namespace
}  // namespace tessera::comm

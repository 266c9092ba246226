// Two "hosts" made of network namespaces + a veth pair: the TCP store
// served in namespace A and used from namespace B, and a two-node
// `tessera launch` job with one node per namespace.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include <gtest/gtest.h>

#include "netns.h"
#include "tessera/comm/auth.h"
#include "tessera/comm/store_wire.h"
#include "tessera/comm/tcp_store.h"
#include "test_util.h"

namespace tessera {
namespace {

using std::chrono::milliseconds;
using testing::NetnsPair;

constexpr int kPort = 29500;  // fresh namespaces: every port is free
const std::string kToken = "netns-test-token-0123456789abcdef";

// Child-side check: prints the failure and returns 1.
#define CHILD_CHECK(cond, what)                                       \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "[%d] check failed: %s\n", ::getpid(), what); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

std::string Text(const Status& st) { return st.ToString(); }

TEST(NetnsTest, StoreServedInOneNamespaceUsedFromTheOther) {
  NetnsPair net;
  if (!net.ok()) GTEST_SKIP() << net.skip_reason();

  pid_t server_side = NetnsPair::RunInNamespace(net.ns_a(), [&] {
    comm::TcpStoreServer server(kToken);
    auto port = server.Start(net.addr_a(), kPort);
    CHILD_CHECK(port.ok(), Text(port.status()).c_str());
    auto c = comm::TcpStoreClient::Connect(net.addr_a(), kPort, kToken);
    CHILD_CHECK(c.ok(), Text(c.status()).c_str());
    CHILD_CHECK((*c)->SetString("from-a", "hello from A").ok(), "set from-a");
    auto b = (*c)->GetString("from-b", milliseconds(20000));
    CHILD_CHECK(b.ok(), Text(b.status()).c_str());
    CHILD_CHECK(*b == "hello from B", b->c_str());
    CHILD_CHECK((*c)->Wait({"b-done"}, milliseconds(20000)).ok(), "wait b-done");
    // The intruder from B (wrong token) and B's raw socket (no handshake).
    CHILD_CHECK(server.refused_connections() >= 1, "the wrong token was refused");
    return 0;
  });
  pid_t client_side = NetnsPair::RunInNamespace(net.ns_b(), [&] {
    comm::TcpStoreClientOptions o;
    o.connect_timeout = milliseconds(20000);
    // A wrong token across the veth is refused too.
    auto intruder = comm::TcpStoreClient::Connect(net.addr_a(), kPort, "some-other-jobs-token-xyz", o);
    CHILD_CHECK(!intruder.ok() && intruder.status().code() == StatusCode::kFailedPrecondition,
                "wrong token refused");
    auto c = comm::TcpStoreClient::Connect(net.addr_a(), kPort, kToken, o);
    CHILD_CHECK(c.ok(), Text(c.status()).c_str());
    auto a = (*c)->GetString("from-a", milliseconds(20000));
    CHILD_CHECK(a.ok(), Text(a.status()).c_str());
    CHILD_CHECK(*a == "hello from A", a->c_str());
    CHILD_CHECK((*c)->SetString("from-b", "hello from B").ok(), "set from-b");
    auto n = (*c)->Add("counter", 41);
    CHILD_CHECK(n.ok() && *n == 41, "add");
    // The connection really leaves from B's veth address.
    auto raw = comm::wire::ConnectOnce(net.addr_a(), kPort, std::chrono::steady_clock::now() + milliseconds(5000));
    CHILD_CHECK(raw.ok(), Text(raw.status()).c_str());
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    ::getsockname(*raw, reinterpret_cast<sockaddr*>(&local), &len);
    char ip[INET_ADDRSTRLEN] = {0};
    ::inet_ntop(AF_INET, &local.sin_addr, ip, sizeof(ip));
    ::close(*raw);
    CHILD_CHECK(net.addr_b() == ip, ip);
    CHILD_CHECK((*c)->SetString("b-done", "1").ok(), "set b-done");
    return 0;
  });
  EXPECT_EQ(NetnsPair::Wait(client_side, milliseconds(60000)), 0);
  EXPECT_EQ(NetnsPair::Wait(server_side, milliseconds(60000)), 0);
}

TEST(NetnsTest, TwoNodeLaunchAcrossNamespaces) {
  NetnsPair net;
  if (!net.ok()) GTEST_SKIP() << net.skip_reason();
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  self[n] = 0;
  const std::string master = net.addr_a() + ":" + std::to_string(kPort);
  auto node = [&](const std::string& ns, int rank) {
    return std::vector<std::string>{"/bin/ip", "netns", "exec", ns, TESSERA_BIN, "launch", "--nproc", "2",
                                    "--nnodes", "2", "--node-rank", std::to_string(rank), "--master", master,
                                    "--connect-timeout", "30", "--", self, "--gtest_filter=LaunchChild.Rank"};
  };
  const std::map<std::string, std::string> env = {{"TESSERA_LAUNCH_CHILD", "rendezvous"},
                                                  {"TESSERA_JOB_TOKEN", kToken}};
  testing::Subprocess node1(node(net.ns_b(), 1), env);
  testing::Subprocess node0(node(net.ns_a(), 0), env);
  testing::ProcResult r0 = node0.Finish(milliseconds(90000));
  testing::ProcResult r1 = node1.Finish(milliseconds(90000));
  ASSERT_EQ(r0.exit_code, 0) << r0.out << r0.err;
  ASSERT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  EXPECT_NE(r0.out.find("[rank 0] CHILD-OK rank 0 of 4"), std::string::npos) << r0.out;
  EXPECT_NE(r0.out.find("[rank 1] CHILD-OK rank 1 of 4"), std::string::npos) << r0.out;
  EXPECT_NE(r1.out.find("[rank 2] CHILD-OK rank 2 of 4"), std::string::npos) << r1.out;
  EXPECT_NE(r1.out.find("[rank 3] CHILD-OK rank 3 of 4"), std::string::npos) << r1.out;
}

}  // namespace
}  // namespace tessera

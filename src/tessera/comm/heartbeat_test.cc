// The worker's side of the launcher agent: TESSERA_RESTART_COUNT parsing and
// the per-attempt store prefix (a fresh rendezvous), a spare taking the
// rank the agent writes on its socket, heartbeat bytes at the interval, and
// no-ops outside an agent.
#include "tessera/comm/heartbeat.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tessera/comm/job_env.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm {
namespace {

using std::chrono::milliseconds;

const std::string kToken = "0123456789abcdef0123456789abcdef";

EnvMap Launched(int port, const std::string& restart) {
  return {{"RANK", "0"},
          {"WORLD_SIZE", "2"},
          {"LOCAL_RANK", "0"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"TESSERA_JOB_TOKEN", kToken},
          {"TESSERA_STORE_HOSTED", "1"},
          {"TESSERA_RESTART_COUNT", restart}};
}

TEST(AgentWorker, RestartCountGivesEachAttemptItsOwnStoreKeys) {
  TcpStoreServer launcher(kToken);
  const int port = launcher.Start("127.0.0.1", 0).value();
  auto first = ParseJobEnv(Launched(port, "0"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->restart_count, 0);
  auto second = ParseJobEnv(Launched(port, "2"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->restart_count, 2);
  auto s0 = ConnectJobStore(*first, milliseconds(5000));
  auto s2 = ConnectJobStore(*second, milliseconds(5000));
  ASSERT_TRUE(s0.ok() && s2.ok());
  ASSERT_TRUE((*s0)->SetString("rendezvous", "stale").ok());
  // Attempt 2 does not see attempt 0's key; its own keys live under attempt2/.
  EXPECT_EQ((*s2)->GetString("rendezvous", milliseconds(0)).status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE((*s2)->SetString("rendezvous", "fresh").ok());
  EXPECT_EQ((*s0)->GetString("attempt2/rendezvous", milliseconds(0)).value(), "fresh");
  EXPECT_EQ((*s0)->GetString("rendezvous", milliseconds(0)).value(), "stale");
  auto bad = ParseJobEnv(Launched(port, "x"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("TESSERA_RESTART_COUNT"), std::string::npos) << bad.status().ToString();
}

TEST(AgentWorker, SpareTakesTheRankTheAgentAssigns) {
  EXPECT_TRUE(AwaitSpareAssignment().ok());  // not a spare: returns at once
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ::setenv("TESSERA_SPARE", "1", 1);
  ::setenv("TESSERA_SPARE_FD", std::to_string(fds[1]).c_str(), 1);
  ::unsetenv("RANK");
  std::string seen;
  std::thread agent([&] {
    char c = 0;
    if (::recv(fds[0], &c, 1, 0) == 1) seen.push_back(c);  // 'S': ready
    const std::string msg = "RANK=3\nLOCAL_RANK=1\nTESSERA_RESTART_COUNT=1\nTESSERA_LAST_FAILURE={\"rank\":3}\n\n";
    EXPECT_EQ(::send(fds[0], msg.data(), msg.size(), MSG_NOSIGNAL), static_cast<ssize_t>(msg.size()));
  });
  Status st = AwaitSpareAssignment();
  agent.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(seen, "S");
  EXPECT_STREQ(std::getenv("RANK"), "3");
  EXPECT_STREQ(std::getenv("LOCAL_RANK"), "1");
  EXPECT_STREQ(std::getenv("TESSERA_RESTART_COUNT"), "1");
  EXPECT_STREQ(std::getenv("TESSERA_LAST_FAILURE"), "{\"rank\":3}");
  EXPECT_EQ(std::getenv("TESSERA_SPARE"), nullptr);
  EXPECT_TRUE(AwaitSpareAssignment().ok());  // assigned once: no second wait

  // The agent going away before assigning is an error, not a hang.
  ::setenv("TESSERA_SPARE", "1", 1);
  ::setenv("TESSERA_SPARE_FD", std::to_string(fds[1]).c_str(), 1);
  ::close(fds[0]);
  st = AwaitSpareAssignment();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  ::close(fds[1]);
  for (const char* k : {"TESSERA_SPARE", "TESSERA_SPARE_FD", "RANK", "LOCAL_RANK", "TESSERA_RESTART_COUNT",
                        "TESSERA_LAST_FAILURE"}) {
    ::unsetenv(k);
  }
}

TEST(AgentWorker, HeartbeatsArriveAtTheIntervalAndReportsAreFramed) {
  EXPECT_FALSE(UnderLaunchAgent());
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  ::setenv("TESSERA_HEARTBEAT_FD", std::to_string(fds[1]).c_str(), 1);
  ::setenv("TESSERA_HEARTBEAT_MS", "50", 1);
  EXPECT_TRUE(UnderLaunchAgent());
  StartHeartbeatFromEnvironment();
  StartHeartbeatFromEnvironment();  // idempotent: still one thread
  EXPECT_TRUE(ReportRestored("memory", 40, 2));
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + milliseconds(5000);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::recv(fds[0], buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (std::count(got.begin(), got.end(), 'H') >= 5 && got.find('\n') != std::string::npos) break;
  }
  EXPECT_GE(std::count(got.begin(), got.end(), 'H'), 5) << got;
  EXPECT_NE(got.find("R{\"source\":\"memory\",\"step\":40,\"steps_lost\":2}\n"), std::string::npos) << got;
  ::unsetenv("TESSERA_HEARTBEAT_FD");
  ::unsetenv("TESSERA_HEARTBEAT_MS");
  ::close(fds[0]);  // the thread notices the agent is gone and stops; joined at exit
}

}  // namespace
}  // namespace tessera::comm

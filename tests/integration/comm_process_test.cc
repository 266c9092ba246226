// The communication library with ranks as separate processes: every
// collective under `tessera launch` over shm and tcp, `tessera ccl-perf`
// under the launcher, a rank SIGKILLed mid-collective (every survivor must
// fail within the timeout with an error naming the op, and never hang), and
// two "hosts" made of network namespaces joined by veth running collectives
// hierarchically (shm inside each namespace, tcp across).
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "netns.h"
#include "test_util.h"
#include "tessera/comm/api/communicator.h"

namespace tessera {
namespace {

using testing::FreePort;
using testing::ProcResult;
using testing::RunCommand;
using testing::Subprocess;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kRunLimit(120000);

std::string Self() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string Show(const ProcResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.term_signal) +
         (r.timed_out ? " TIMED OUT" : "") + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// ---- The test binary as one rank (TESSERA_COMM_CHILD selects what it does) ----

void Emit(const std::string& line) {
  if (const char* path = std::getenv("TESSERA_COMM_CHILD_OUT")) {
    std::ofstream(path, std::ios::app) << line << "\n";
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Every collective once, with results checked.
Status RunCollectives(comm::Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<float> x(300001);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((r + 1) * (i % 7));
  TESSERA_RETURN_IF_ERROR(c.AllReduce(x.data(), x.data(), x.size(), comm::DataType::kFloat32, comm::ReduceOp::kSum));
  for (size_t i = 0; i < x.size(); i += 997) {
    if (x[i] != static_cast<float>(n * (n + 1) / 2 * (i % 7))) return Internal("all_reduce wrong at {}", i);
  }
  // >= 1 MiB between processes runs single copy: out of place, every
  // element checked, then a reduce to the last rank (only it gathers).
  std::vector<float> y(x.size(), -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(r * 3 + i % 11);
  TESSERA_RETURN_IF_ERROR(c.AllReduce(x.data(), y.data(), x.size(), comm::DataType::kFloat32, comm::ReduceOp::kMax));
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] != static_cast<float>((n - 1) * 3 + i % 11)) return Internal("out-of-place all_reduce wrong at {}", i);
  }
  std::fill(y.begin(), y.end(), -1.0f);
  TESSERA_RETURN_IF_ERROR(c.Reduce(x.data(), y.data(), x.size(), comm::DataType::kFloat32, comm::ReduceOp::kSum, n - 1));
  for (size_t i = 0; r == n - 1 && i < y.size(); ++i) {
    if (y[i] != static_cast<float>(3 * n * (n - 1) / 2 + n * (i % 11))) return Internal("reduce wrong at {}", i);
  }
  for (size_t count : {size_t{100}, size_t{50000}}) {  // low-latency slot, then single copy / windows
    std::vector<int64_t> mine(count, r), all(count * n);
    TESSERA_RETURN_IF_ERROR(c.AllGather(mine.data(), all.data(), count, comm::DataType::kInt64));
    for (int j = 0; j < n; ++j) {
      if (all[j * count + count - 1] != j) return Internal("all_gather wrong from {}", j);
    }
  }
  std::vector<int32_t> out(4096 * n), in(4096 * n);
  for (int j = 0; j < n; ++j) std::fill(out.begin() + j * 4096, out.begin() + (j + 1) * 4096, r * 100 + j);
  TESSERA_RETURN_IF_ERROR(c.AllToAll(out.data(), in.data(), 4096, comm::DataType::kInt32));
  for (int j = 0; j < n; ++j) {
    if (in[j * 4096] != j * 100 + r) return Internal("all_to_all wrong from {}", j);
  }
  std::vector<double> b(50000, r == n - 1 ? 2.5 : 0.0);
  TESSERA_RETURN_IF_ERROR(c.Broadcast(b.data(), b.data(), b.size(), comm::DataType::kFloat64, n - 1));
  if (b[49999] != 2.5) return Internal("broadcast wrong");
  std::vector<float> rs_in(1000 * n, 1.0f), rs_out(1000);
  TESSERA_RETURN_IF_ERROR(
      c.ReduceScatter(rs_in.data(), rs_out.data(), 1000, comm::DataType::kFloat32, comm::ReduceOp::kSum));
  if (rs_out[999] != static_cast<float>(n)) return Internal("reduce_scatter wrong");
  float token = static_cast<float>(r), got = -1;
  TESSERA_RETURN_IF_ERROR(
      c.SendRecv(&token, 1, (r + 1) % n, &got, 1, (r + n - 1) % n, comm::DataType::kFloat32));
  if (got != static_cast<float>((r + n - 1) % n)) return Internal("send_recv wrong");
  return c.Barrier();
}

// The zero-copy collectives (buffers from AllocShared, which peers map
// through /proc/<pid>/fd), checked, and counted to prove they ran zero copy.
Status RunSharedCollectives(comm::Communicator& c) {
  const int n = c.size(), r = c.rank();
  if (!c.zero_copy()) return Internal("zero copy unavailable between these processes");
  const size_t count = 300001;
  auto alloc = [](size_t bytes) { return static_cast<float*>(comm::AllocShared(bytes).value()); };
  float* send = alloc(count * n * sizeof(float));
  float* recv = alloc(count * n * sizeof(float));
  const uint64_t before = c.zero_copy_ops();
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((r + 1) * (i % 7));
  TESSERA_RETURN_IF_ERROR(c.AllReduce(send, recv, count, comm::DataType::kFloat32, comm::ReduceOp::kSum));
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != static_cast<float>(n * (n + 1) / 2 * (i % 7))) return Internal("all_reduce wrong at {}", i);
  }
  TESSERA_RETURN_IF_ERROR(c.AllReduce(send, send, count, comm::DataType::kFloat32, comm::ReduceOp::kMax));
  if (send[count - 1] != static_cast<float>(n * ((count - 1) % 7))) return Internal("in-place all_reduce wrong");
  TESSERA_RETURN_IF_ERROR(c.Reduce(send, r == 1 ? recv : nullptr, count, comm::DataType::kFloat32,
                                   comm::ReduceOp::kMin, 1));
  if (r == 1 && recv[count - 1] != send[count - 1]) return Internal("reduce wrong");
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(r * 1000 + i % 100);
  TESSERA_RETURN_IF_ERROR(c.AllGather(send, recv, count, comm::DataType::kFloat32));
  for (int j = 0; j < n; ++j) {
    if (recv[j * count + 99] != static_cast<float>(j * 1000 + 99)) return Internal("all_gather wrong from {}", j);
  }
  const size_t block = count / n;
  for (int d = 0; d < n; ++d) std::fill(send + d * block, send + (d + 1) * block, static_cast<float>(r * 100 + d));
  TESSERA_RETURN_IF_ERROR(c.AllToAll(send, recv, block, comm::DataType::kFloat32));
  for (int j = 0; j < n; ++j) {
    if (recv[j * block + block - 1] != static_cast<float>(j * 100 + r)) return Internal("all_to_all wrong from {}", j);
  }
  std::fill(send, send + count, r == n - 1 ? 2.5f : 0.0f);
  TESSERA_RETURN_IF_ERROR(c.Broadcast(send, recv, count, comm::DataType::kFloat32, n - 1));
  if (recv[count - 1] != 2.5f) return Internal("broadcast wrong");
  std::fill(send, send + block * n, 1.0f);
  TESSERA_RETURN_IF_ERROR(c.ReduceScatter(send, recv, block, comm::DataType::kFloat32, comm::ReduceOp::kSum));
  if (recv[block - 1] != static_cast<float>(n)) return Internal("reduce_scatter wrong");
  const uint64_t ran = c.zero_copy_ops() - before;
  TESSERA_RETURN_IF_ERROR(c.Barrier());
  TESSERA_RETURN_IF_ERROR(comm::FreeShared(send));
  TESSERA_RETURN_IF_ERROR(comm::FreeShared(recv));
  if (ran != 7) return Internal("{} of 7 operations ran zero copy", ran);
  // Fresh allocations again and again: their memfds reuse the freed fd
  // numbers (peers must drop the stale mappings) and outnumber the mapping
  // cache (64), yet every all-gather reads the right data.
  const size_t words = 40000;  // 160 KB: past the low-latency slot
  for (int round = 0; round < 100; ++round) {
    auto* mine = static_cast<int32_t*>(comm::AllocShared(words * sizeof(int32_t)).value());
    auto* all = static_cast<int32_t*>(comm::AllocShared(n * words * sizeof(int32_t)).value());
    std::fill(mine, mine + words, r * 1000 + round);
    TESSERA_RETURN_IF_ERROR(c.AllGather(mine, all, words, comm::DataType::kInt32));
    for (int j = 0; j < n; ++j) {
      if (all[j * words + words - 1] != j * 1000 + round) {
        return Internal("round {}: all_gather got {} from rank {}", round, all[j * words + words - 1], j);
      }
    }
    // No barrier: the collective's closing step already guarantees that no
    // peer still reads these buffers.
    TESSERA_RETURN_IF_ERROR(comm::FreeShared(mine));
    TESSERA_RETURN_IF_ERROR(comm::FreeShared(all));
  }
  if (c.zero_copy_ops() - before != 107) return Internal("{} of 107 operations ran zero copy", c.zero_copy_ops() - before);
  // Stale mappings of freed allocations were dropped, not kept (the cache
  // holds up to 64): a few live fds per peer remain mapped here.
  std::ifstream maps("/proc/self/maps");
  int mapped = 0;
  for (std::string line; std::getline(maps, line);) mapped += line.find("tessera-shared-") != std::string::npos;
  if (mapped > 4 * n) return Internal("{} mappings of peers' shared memory left", mapped);
  // An all-to-all-v on shared buffers where rank 0 sends nothing at all (an
  // empty extent: it publishes no allocation) and receives from everyone:
  // nobody may try to map rank 0's send buffer (MoE exchanges do this when a
  // rank received no tokens).
  {
    const size_t per = 1000;
    auto* snd = static_cast<int32_t*>(comm::AllocShared(n * per * sizeof(int32_t)).value());
    auto* rcv = static_cast<int32_t*>(comm::AllocShared(n * per * sizeof(int32_t)).value());
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    for (int j = 0; j < n; ++j) {
      sc[j] = r == 0 ? 0 : per;
      sd[j] = r == 0 ? 0 : j * per;  // rank 0: an empty extent, as an exchange of nothing has
      rc[j] = j == 0 ? 0 : per;
      rd[j] = j * per;
      std::fill(snd + j * per, snd + (j + 1) * per, r * 100 + j);
    }
    std::fill(rcv, rcv + n * per, -1);
    const uint64_t zc = c.zero_copy_ops();
    TESSERA_RETURN_IF_ERROR(c.AllToAllV(snd, sc, sd, rcv, rc, rd, comm::DataType::kInt32));
    for (int j = 1; j < n; ++j) {
      if (rcv[j * per + per - 1] != j * 100 + r) return Internal("all_to_allv with an empty sender: wrong from {}", j);
    }
    if (rcv[0] != -1) return Internal("all_to_allv with an empty sender wrote rank 0's empty block");
    if (c.zero_copy_ops() == zc) return Internal("the all_to_allv with an empty sender did not run zero copy");
    TESSERA_RETURN_IF_ERROR(c.Barrier());
    TESSERA_RETURN_IF_ERROR(comm::FreeShared(snd));
    TESSERA_RETURN_IF_ERROR(comm::FreeShared(rcv));
  }
  return Status::Ok();
}

TEST(CommChild, Rank) {
  const char* mode_env = std::getenv("TESSERA_COMM_CHILD");
  if (mode_env == nullptr) GTEST_SKIP() << "runs only as a rank process of the CommProcess tests";
  const std::string mode = mode_env;
  auto comm = comm::Communicator::FromEnvironment();
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  comm::Communicator& c = **comm;
  const std::string tag = "rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size());
  if (mode == "collectives" || mode == "shared") {
    Status st = mode == "shared" ? RunSharedCollectives(c) : RunCollectives(c);
    ASSERT_TRUE(st.ok()) << tag << ": " << st.ToString();
    Emit("COMM-CHILD-OK " + tag + " transport " + std::string(comm::transport::TransportKindName(c.transport_kind())));
    return;
  }
  // "loop": all-reduces until one fails (a peer gets SIGKILLed by the test).
  Emit("COMM-READY " + tag + " pid " + std::to_string(::getpid()));
  // Private memory, or (TESSERA_COMM_SHARED=1) shared memory the peers map.
  const char* shared_env = std::getenv("TESSERA_COMM_SHARED");
  std::vector<float> priv(shared_env != nullptr && *shared_env != '\0' ? 0 : 1 << 20, 1.0f);
  float* x = priv.data();
  if (priv.empty()) {
    x = static_cast<float*>(comm::AllocShared((1 << 20) * sizeof(float)).value());
    std::fill(x, x + (1 << 20), 1.0f);
  }
  for (int i = 0; i < 1000000; ++i) {
    Status st = c.AllReduce(x, x, 1 << 20, comm::DataType::kFloat32, comm::ReduceOp::kMax);
    if (!st.ok()) {
      Emit("COMM-ERROR " + tag + ": " + st.ToString());
      std::fflush(stdout);
      // Rank 0 hosts the job's store (no launcher here): keep it up a moment
      // for the other survivors' lookups of why their peers gave up.
      if (c.rank() == 0) std::this_thread::sleep_for(milliseconds(1500));
      std::_Exit(3);
    }
  }
  Emit("COMM-NO-ERROR " + tag);
}

// ---- Tests ----

std::vector<std::string> LaunchSelf(int nproc) {
  return {TESSERA_BIN, "launch", "--nproc", std::to_string(nproc), "--", Self(), "--gtest_filter=CommChild.Rank"};
}

TEST(CommProcess, ZeroCopyCollectivesOnSharedBuffers) {
  for (int n : {2, 4}) {
    ProcResult r = RunCommand(LaunchSelf(n), kRunLimit, {{"TESSERA_COMM_CHILD", "shared"}});
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    for (int k = 0; k < n; ++k) {
      EXPECT_NE(r.out.find("COMM-CHILD-OK rank " + std::to_string(k) + " of " + std::to_string(n) + " transport shm"),
                std::string::npos)
          << Show(r);
    }
  }
}

TEST(CommProcess, EveryCollectiveOverShmAndTcp) {
  for (const char* transport : {"shm", "tcp"}) {
    ProcResult r = RunCommand(LaunchSelf(4), kRunLimit,
                              {{"TESSERA_COMM_CHILD", "collectives"}, {"TESSERA_TRANSPORT", transport}});
    ASSERT_EQ(r.exit_code, 0) << transport << "\n" << Show(r);
    for (int k = 0; k < 4; ++k) {
      EXPECT_NE(r.out.find("COMM-CHILD-OK rank " + std::to_string(k) + " of 4 transport " + transport),
                std::string::npos)
          << Show(r);
    }
  }
}

TEST(CommProcess, CclPerfUnderTheLauncher) {
  for (const char* op : {"allreduce", "alltoall", "reducescatter", "sendrecv"}) {
    ProcResult r = RunCommand({TESSERA_BIN, "launch", "--nproc", "3", "--", TESSERA_BIN, "ccl-perf", op, "-b", "8", "-e",
                               "256K", "-f", "16", "-n", "2", "-w", "1"},
                              kRunLimit);
    ASSERT_EQ(r.exit_code, 0) << op << "\n" << Show(r);
    EXPECT_NE(r.out.find("[rank 0] # Out of bounds values : 0 OK"), std::string::npos) << Show(r);
    EXPECT_NE(r.out.find("[rank 0] # Avg bus bandwidth    : "), std::string::npos) << Show(r);
  }
}

// Starts `n` rank processes directly (no launcher: it would stop the job
// when one rank dies, and we want to see what the survivors report).
std::vector<std::unique_ptr<Subprocess>> StartRanks(int n, const std::string& transport, int timeout_ms,
                                                     bool shared_buffers = false) {
  const std::string port = std::to_string(FreePort());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{Self(), "--gtest_filter=CommChild.Rank"},
        std::map<std::string, std::string>{{"TESSERA_COMM_CHILD", "loop"},
                                           {"RANK", std::to_string(r)},
                                           {"WORLD_SIZE", std::to_string(n)},
                                           {"LOCAL_RANK", std::to_string(r)},
                                           {"LOCAL_WORLD_SIZE", std::to_string(n)},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", port},
                                           {"TESSERA_JOB_TOKEN", "comm-process-test-token-0123456789"},
                                           {"TESSERA_STORE_HOSTED", ""},
                                           {"TESSERA_TRANSPORT", transport},
                                           {"TESSERA_COMM_TIMEOUT_MS", std::to_string(timeout_ms)},
                                           {"TESSERA_COMM_SHARED", shared_buffers ? "1" : ""}}));
  }
  return ranks;
}

TEST(CommProcess, SigkillMidCollectiveFailsEverySurvivorWithinTheTimeout) {
  // "shm-shared": the all-reduces run zero copy on buffers the victim shares.
  for (const char* variant : {"shm", "tcp", "shm-shared"}) {
    constexpr int kRanks = 4, kVictim = 2, kTimeoutMs = 4000;
    const bool shared = std::string(variant) == "shm-shared";
    const char* transport = shared ? "shm" : variant;
    auto ranks = StartRanks(kRanks, transport, kTimeoutMs, shared);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(ranks[r]->WaitForOutput("COMM-READY", milliseconds(60000)))
          << transport << " rank " << r << " never got ready\n"
          << ranks[r]->out() << ranks[r]->err();
    }
    std::this_thread::sleep_for(milliseconds(200));  // deep inside the loop of 4 MiB all-reduces
    const auto killed_at = Clock::now();
    ASSERT_EQ(::kill(ranks[kVictim]->pid(), SIGKILL), 0);
    for (int r = 0; r < kRanks; ++r) {
      if (r == kVictim) continue;
      ProcResult res = ranks[r]->Finish(milliseconds(kTimeoutMs + 10000));
      const double secs = std::chrono::duration<double>(Clock::now() - killed_at).count();
      EXPECT_FALSE(res.timed_out) << transport << " rank " << r << " hung\n" << Show(res);
      EXPECT_EQ(res.exit_code, 3) << transport << " rank " << r << "\n" << Show(res);
      EXPECT_LT(secs, kTimeoutMs / 1000.0 + 3) << transport << " rank " << r << "\n" << Show(res);
      EXPECT_NE(res.out.find("COMM-ERROR"), std::string::npos) << Show(res);
      const size_t at = res.out.find("COMM-ERROR");
      if (at != std::string::npos) {
        std::printf("[%s, %.2f s] %s\n", transport, secs, res.out.substr(at, res.out.find('\n', at) - at).c_str());
      }
      EXPECT_NE(res.out.find("all_reduce"), std::string::npos) << Show(res);
      // Over shm every survivor waits on the victim and names it; over tcp the
      // victim's neighbours name it and the others name the neighbour that
      // gave up on them.
      if (std::string(transport) == "shm" || r == kVictim - 1 || r == kVictim + 1) {
        EXPECT_NE(res.out.find("rank 2"), std::string::npos) << transport << " rank " << r << "\n" << Show(res);
      }
    }
    ranks[kVictim]->Finish(milliseconds(5000));
  }
}

TEST(CommProcess, TwoHostsInNetworkNamespacesRunHierarchicalCollectives) {
  testing::NetnsPair net;
  if (!net.ok()) GTEST_SKIP() << net.skip_reason();
  const std::string port = std::to_string(FreePort());
  char dir_template[] = "/tmp/tessera-comm-netns-XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r) {
    const bool host_a = r < 2;
    const std::string out = dir + "/rank" + std::to_string(r);
    const std::string self = Self();
    pids.push_back(testing::NetnsPair::RunInNamespace(host_a ? net.ns_a() : net.ns_b(), [&, r, host_a]() -> int {
      const std::string env[] = {"TESSERA_COMM_CHILD=collectives",
                                 "RANK=" + std::to_string(r),
                                 "WORLD_SIZE=4",
                                 "LOCAL_RANK=" + std::to_string(r % 2),
                                 "LOCAL_WORLD_SIZE=2",
                                 "MASTER_ADDR=" + net.addr_a(),
                                 "MASTER_PORT=" + port,
                                 "TESSERA_JOB_TOKEN=netns-comm-test-token-0123456789",
                                 std::string("TESSERA_HOST_ID=") + (host_a ? "host-a" : "host-b"),
                                 "TESSERA_COMM_CHILD_OUT=" + out,
                                 "TESSERA_COMM_TIMEOUT_MS=30000"};
      for (const std::string& e : env) ::putenv(::strdup(e.c_str()));
      ::unsetenv("TESSERA_STORE_HOSTED");
      ::unsetenv("TESSERA_TRANSPORT");
      ::execl(self.c_str(), self.c_str(), "--gtest_filter=CommChild.Rank", static_cast<char*>(nullptr));
      return 98;
    }));
  }
  for (int r = 0; r < 4; ++r) {
    const int rc = testing::NetnsPair::Wait(pids[r], kRunLimit);
    std::ifstream in(dir + "/rank" + std::to_string(r));
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(rc, 0) << "rank " << r << ": " << text.str();
    // The flat transport across the two hosts is tcp; all_reduce/all_gather/
    // reduce_scatter ran hierarchically (shm inside each namespace).
    EXPECT_NE(text.str().find("COMM-CHILD-OK rank " + std::to_string(r) + " of 4 transport tcp"), std::string::npos)
        << text.str();
  }
  (void)std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace tessera

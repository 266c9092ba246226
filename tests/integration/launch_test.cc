// `tessera launch` end to end: the rank environment and prefixed output,
// no interleaving within lines, stopping the job when a rank exits non-zero
// or is SIGKILLed (summary, exit code, bounded time), signal forwarding,
// job timeout, ranks meeting in the launcher's store (the test binary runs
// itself as the ranks: LaunchChild.*), and a two-node job on one host.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tessera/comm/job_env.h"
#include "tessera/comm/store.h"
#include "test_util.h"

namespace tessera {
namespace {

using std::chrono::milliseconds;
using testing::Lines;
using testing::FreePort;
using testing::ProcResult;
using testing::RunCommand;
using testing::Subprocess;

constexpr milliseconds kRunLimit(60000);

std::vector<std::string> Launch(std::vector<std::string> launch_args, const std::string& shell) {
  std::vector<std::string> argv = {TESSERA_BIN, "launch"};
  argv.insert(argv.end(), launch_args.begin(), launch_args.end());
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", shell});
  return argv;
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

TEST(LaunchTest, FourRanksGetTheirEnvironmentAndPrefixedLines) {
  ProcResult r = RunCommand(
      Launch({"--nproc", "4"},
             "echo \"rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
             "store=$TESSERA_STORE_ADDR:$TESSERA_STORE_PORT torch=$MASTER_ADDR:$MASTER_PORT "
             "hosted=$TESSERA_STORE_HOSTED tok=${#TESSERA_JOB_TOKEN}\"; "
             "echo \"err from $RANK\" >&2"),
      kRunLimit);
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << Diagnose(r);
  std::set<int> ranks;
  std::set<int> stores;
  for (const std::string& line : lines) {
    int prefix = -1, rank = -1, world = -1, local = -1, local_world = -1, port = -1, torch_port = -1, hosted = -1,
        tok = -1, end = 0;
    const int fields = std::sscanf(
        line.c_str(), "[rank %d] rank=%d world=%d local=%d/%d store=127.0.0.1:%d torch=127.0.0.1:%d hosted=%d tok=%d%n",
        &prefix, &rank, &world, &local, &local_world, &port, &torch_port, &hosted, &tok, &end);
    ASSERT_EQ(fields, 9) << "line: " << line;
    // MASTER_PORT is PyTorch's (a free port), not Tessera's store.
    EXPECT_GT(torch_port, 0);
    EXPECT_NE(torch_port, port);
    EXPECT_EQ(static_cast<size_t>(end), line.size()) << "line: " << line;
    EXPECT_EQ(prefix, rank);
    EXPECT_EQ(local, rank);  // one node: local rank == rank
    EXPECT_EQ(world, 4);
    EXPECT_EQ(local_world, 4);
    EXPECT_EQ(hosted, 1);
    EXPECT_EQ(tok, 64);  // a fresh 64-hex-character token
    ranks.insert(rank);
    stores.insert(port);
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(stores.size(), 1u);
  for (int k = 0; k < 4; ++k) {
    const std::string want = "[rank " + std::to_string(k) + "] err from " + std::to_string(k);
    EXPECT_NE(r.err.find(want), std::string::npos) << Diagnose(r);
  }
}

TEST(LaunchTest, LinesAreNeverInterleaved) {
  // Each rank writes 300 lines of ~1 KB as fast as it can.
  ProcResult r = RunCommand(
      Launch({"--nproc", "4"},
             "awk -v r=$RANK 'BEGIN { s = sprintf(\"%01000d\", 0); "
             "for (i = 0; i < 300; i++) printf \"%s-%04d-%s\\n\", r, i, s }'"),
      kRunLimit);
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r).substr(0, 2000);
  const std::string zeros(1000, '0');
  int next[4] = {0, 0, 0, 0};
  for (const std::string& line : Lines(r.out)) {
    int rank = -1, writer = -1, index = -1, end = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "[rank %d] %d-%4d-%n", &rank, &writer, &index, &end), 3)
        << "garbled line: " << line.substr(0, 200);
    ASSERT_TRUE(rank >= 0 && rank < 4) << line.substr(0, 200);
    ASSERT_EQ(line.substr(static_cast<size_t>(end)), zeros) << "garbled line: " << line.substr(0, 200);
    EXPECT_EQ(rank, writer);
    EXPECT_EQ(index, next[rank]) << "rank " << rank << " lines out of order";
    next[rank] = index + 1;
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(next[k], 300) << "rank " << k;
}

TEST(LaunchTest, RankExitingThreeStopsTheOthers) {
  ProcResult r = RunCommand(
      Launch({"--nproc", "4", "--grace", "5"},
             "if [ \"$RANK\" = 2 ]; then sleep 0.5; echo failing; exit 3; fi; exec sleep 120"),
      kRunLimit);
  EXPECT_EQ(r.exit_code, 3) << Diagnose(r);
  // SIGTERM stops `sleep` at once: well inside the 5 s grace period.
  EXPECT_LT(r.seconds, 5.0) << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 2] failing"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 2 (pid"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("exited with code 3"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("runtime"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("exit 3 <- first failure"), std::string::npos) << Diagnose(r);
  int terminated = 0;
  for (const std::string& line : Lines(r.err)) {
    if (line.find("SIGTERM (sent by launcher)") != std::string::npos) ++terminated;
  }
  EXPECT_EQ(terminated, 3) << Diagnose(r);
}

TEST(LaunchTest, RanksIgnoringSigtermAreKilledAfterGrace) {
  ProcResult r = RunCommand(
      Launch({"--nproc", "3", "--grace", "1"},
             "trap '' TERM; if [ \"$RANK\" = 0 ]; then sleep 0.3; exit 5; fi; sleep 120"),
      kRunLimit);
  EXPECT_EQ(r.exit_code, 5) << Diagnose(r);
  EXPECT_GE(r.seconds, 1.0) << Diagnose(r);
  EXPECT_LT(r.seconds, 15.0) << Diagnose(r);
  EXPECT_NE(r.err.find("sending SIGKILL"), std::string::npos) << Diagnose(r);
  int killed = 0;
  for (const std::string& line : Lines(r.err)) {
    if (line.find("SIGKILL (sent by launcher)") != std::string::npos) ++killed;
  }
  EXPECT_EQ(killed, 2) << Diagnose(r);
}

TEST(LaunchTest, SigkilledRankStopsTheJob) {
  Subprocess launcher(Launch({"--nproc", "3", "--grace", "5"}, "echo \"pid $$\"; exec sleep 120"));
  ASSERT_TRUE(launcher.WaitForOutput("pid ", milliseconds(20000), 3)) << launcher.out() << launcher.err();
  const std::string out = launcher.out();
  const size_t at = out.find("[rank 1] pid ");
  ASSERT_NE(at, std::string::npos) << out;
  const pid_t victim = std::atoi(out.c_str() + at + std::strlen("[rank 1] pid "));
  ASSERT_GT(victim, 0) << out;
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  ProcResult r = launcher.Finish(kRunLimit);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << Diagnose(r);
  EXPECT_LT(r.seconds, 25.0) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 1 (pid " + std::to_string(victim) + ") was killed by SIGKILL"), std::string::npos)
      << Diagnose(r);
  EXPECT_NE(r.err.find("SIGKILL <- first failure"), std::string::npos) << Diagnose(r);
  int terminated = 0;
  for (const std::string& line : Lines(r.err)) {
    if (line.find("SIGTERM (sent by launcher)") != std::string::npos) ++terminated;
  }
  EXPECT_EQ(terminated, 2) << Diagnose(r);
}

TEST(LaunchTest, SigintIsForwardedToEveryRank) {
  Subprocess launcher(Launch({"--nproc", "2", "--grace", "5"},
                             "trap 'echo got INT; exit 0' INT; echo ready; "
                             "i=0; while [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"));
  ASSERT_TRUE(launcher.WaitForOutput("ready", milliseconds(20000), 2)) << launcher.out() << launcher.err();
  ASSERT_EQ(::kill(launcher.pid(), SIGINT), 0);
  ProcResult r = launcher.Finish(kRunLimit);
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 0] got INT"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 1] got INT"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("received SIGINT"), std::string::npos) << Diagnose(r);
}

TEST(LaunchTest, JobTimeoutStopsTheJob) {
  ProcResult r = RunCommand(Launch({"--nproc", "2", "--timeout", "0.5"}, "exec sleep 120"), kRunLimit);
  EXPECT_EQ(r.exit_code, 124) << Diagnose(r);
  EXPECT_LT(r.seconds, 10.0) << Diagnose(r);
  EXPECT_NE(r.err.find("--timeout"), std::string::npos) << Diagnose(r);
}

TEST(LaunchTest, BadInvocationsFailClearly) {
  ProcResult none = RunCommand({TESSERA_BIN, "launch", "--nproc", "1", "--", "no-such-command-xyz"}, kRunLimit);
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("'no-such-command-xyz' not found on PATH"), std::string::npos) << Diagnose(none);
  ProcResult zero = RunCommand({TESSERA_BIN, "launch", "--nproc", "0", "--", "true"}, kRunLimit);
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.err.find("--nproc"), std::string::npos) << Diagnose(zero);
  ProcResult multi = RunCommand({TESSERA_BIN, "launch", "--nproc", "1", "--nnodes", "2", "--", "true"}, kRunLimit);
  EXPECT_NE(multi.exit_code, 0);
  EXPECT_NE(multi.err.find("--master"), std::string::npos) << Diagnose(multi);
  ProcResult node1 = RunCommand({TESSERA_BIN, "launch", "--nproc", "1", "--nnodes", "2", "--node-rank", "1",
                                 "--master", "127.0.0.1:1", "--", "true"},
                                kRunLimit, {{"TESSERA_JOB_TOKEN", ""}});
  EXPECT_NE(node1.exit_code, 0);
  EXPECT_NE(node1.err.find("needs the job token"), std::string::npos) << Diagnose(node1);
}

// ---- The test binary as the ranks of a launched job ----

// Runs only as a rank under `tessera launch` (TESSERA_LAUNCH_CHILD set by
// the tests below): reads the job environment, meets the other ranks in
// the launcher's store and checks what each published.
TEST(LaunchChild, Rank) {
  const char* mode = std::getenv("TESSERA_LAUNCH_CHILD");
  if (mode == nullptr) GTEST_SKIP() << "runs only as a rank under `tessera launch` (see LaunchTest.*Store*)";
  auto job = comm::ReadJobEnv();
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // Under mpirun nobody hosts the store for the ranks: rank 0 does.
  EXPECT_EQ(job->store_hosted, std::string(mode) != "mpirun");
  if (std::string(mode) == "fail-on-node1" && job->node_rank == 1 && job->local_rank == 0) {
    std::this_thread::sleep_for(milliseconds(300));
    std::fprintf(stderr, "CHILD-FAILING\n");
    std::exit(3);
  }
  auto store = comm::ConnectJobStore(*job, milliseconds(30000));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string me = std::to_string(job->rank);
  ASSERT_TRUE((*store)->SetString("who/" + me, "rank " + me + " of node " + std::to_string(job->node_rank)).ok());
  Status st = comm::StoreBarrier(**store, "all-set", job->world_size, milliseconds(30000));
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (int r = 0; r < job->world_size; ++r) {
    auto v = (*store)->GetString("who/" + std::to_string(r), milliseconds(0));
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->rfind("rank " + std::to_string(r) + " of node ", 0), 0u) << *v;
  }
  if (std::string(mode) == "fail-on-node1") {
    std::this_thread::sleep_for(milliseconds(60000));  // stopped by the launcher long before
  }
  if (!::testing::Test::HasFailure()) std::printf("CHILD-OK rank %d of %d\n", job->rank, job->world_size);
}

std::vector<std::string> LaunchSelf(std::vector<std::string> launch_args) {
  std::vector<std::string> argv = {TESSERA_BIN, "launch"};
  argv.insert(argv.end(), launch_args.begin(), launch_args.end());
  argv.insert(argv.end(), {"--", SelfExe(), "--gtest_filter=LaunchChild.Rank"});
  return argv;
}

TEST(LaunchTest, RanksRendezvousThroughLauncherStore) {
  ProcResult r = RunCommand(LaunchSelf({"--nproc", "3"}), kRunLimit, {{"TESSERA_LAUNCH_CHILD", "rendezvous"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  for (int k = 0; k < 3; ++k) {
    EXPECT_NE(r.out.find("[rank " + std::to_string(k) + "] CHILD-OK rank " + std::to_string(k) + " of 3"),
              std::string::npos)
        << Diagnose(r);
  }
}

TEST(LaunchTest, OpenMpiRanksMeetInRankZerosStore) {
  // The same ranks started by Open MPI's mpirun: Open MPI variables, the
  // token derived from mpirun's per-job key, rank 0 hosting the store.
  std::string mpirun;
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"}) {
    if (::access(p, X_OK) == 0) mpirun = p;
  }
  if (mpirun.empty()) GTEST_SKIP() << "mpirun (openmpi-bin) is not installed";
  ProcResult r = RunCommand({mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3", SelfExe(),
                             "--gtest_filter=LaunchChild.Rank"},
                            kRunLimit,
                            {{"TESSERA_LAUNCH_CHILD", "mpirun"}, {"TESSERA_JOB_TOKEN", ""}, {"RANK", ""},
                             {"WORLD_SIZE", ""}, {"MASTER_ADDR", ""}, {"MASTER_PORT", ""}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  for (int k = 0; k < 3; ++k) {
    EXPECT_NE(r.out.find("CHILD-OK rank " + std::to_string(k) + " of 3"), std::string::npos) << Diagnose(r);
  }
}

TEST(LaunchTest, TwoNodeJobOnOneHostSharesNodeZerosStore) {
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  const std::map<std::string, std::string> env = {{"TESSERA_LAUNCH_CHILD", "rendezvous"},
                                                  {"TESSERA_JOB_TOKEN", "two-node-test-token-0123456789"}};
  Subprocess node1(LaunchSelf({"--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master", master}), env);
  Subprocess node0(LaunchSelf({"--nproc", "2", "--nnodes", "2", "--node-rank", "0", "--master", master}), env);
  ProcResult r0 = node0.Finish(kRunLimit);
  ProcResult r1 = node1.Finish(kRunLimit);
  ASSERT_EQ(r0.exit_code, 0) << Diagnose(r0);
  ASSERT_EQ(r1.exit_code, 0) << Diagnose(r1);
  for (int k : {0, 1}) {
    EXPECT_NE(r0.out.find("[rank " + std::to_string(k) + "] CHILD-OK rank " + std::to_string(k) + " of 4"),
              std::string::npos)
        << Diagnose(r0);
  }
  for (int k : {2, 3}) {
    EXPECT_NE(r1.out.find("[rank " + std::to_string(k) + "] CHILD-OK rank " + std::to_string(k) + " of 4"),
              std::string::npos)
        << Diagnose(r1);
  }
}

TEST(LaunchTest, FailureOnOneNodeStopsTheOtherNode) {
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  const std::map<std::string, std::string> env = {{"TESSERA_LAUNCH_CHILD", "fail-on-node1"},
                                                  {"TESSERA_JOB_TOKEN", "two-node-test-token-0123456789"}};
  Subprocess node0(LaunchSelf({"--nproc", "2", "--nnodes", "2", "--node-rank", "0", "--master", master}), env);
  Subprocess node1(LaunchSelf({"--nproc", "2", "--nnodes", "2", "--node-rank", "1", "--master", master}), env);
  ProcResult r1 = node1.Finish(kRunLimit);
  ProcResult r0 = node0.Finish(kRunLimit);
  EXPECT_EQ(r1.exit_code, 3) << Diagnose(r1);
  EXPECT_NE(r0.exit_code, 0) << Diagnose(r0);
  EXPECT_LT(r0.seconds, 30.0) << Diagnose(r0);
  EXPECT_NE(r0.err.find("another node failed (node 1: rank 2"), std::string::npos) << Diagnose(r0);
}

}  // namespace
}  // namespace tessera

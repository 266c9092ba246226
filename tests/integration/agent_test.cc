// `tessera launch` as an agent (comm/launcher_agent.h): a rank SIGKILLed at
// step k → the group restarts and the job finishes by itself; a SIGSTOPped
// rank (hung) → found by its silent heartbeat, same outcome; a warm spare
// takes over the killed rank; --max-restarts 0 keeps the old behaviour and
// exhausted restarts give up; a worker that never heartbeats is not killed;
// a two-node job restarts in lockstep; a killed agent of one node is
// reported by the other within the heartbeat timeout. The test binary runs
// itself as the workers (AgentChild.Worker).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tessera/comm/api/communicator.h"
#include "tessera/comm/heartbeat.h"
#include "test_util.h"

namespace tessera {
namespace {

using std::chrono::milliseconds;
using testing::FreePort;
using testing::Lines;
using testing::ProcResult;
using testing::RunCommand;
using testing::Subprocess;
using testing::Diagnose;
using testing::OfKind;
using testing::ReadEvents;

std::string TempDir(const std::string& name) { return testing::FreshTempDir("agent-" + name); }

constexpr milliseconds kRunLimit(90000);

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Runs only as a worker under `tessera launch` (AGENT_CHILD set): joins the
// job, runs AGENT_STEPS all-reduce steps of AGENT_STEP_MS each; on the first
// attempt (or every attempt with AGENT_CHILD=kill-always) rank AGENT_VICTIM
// SIGKILLs (kill) or SIGSTOPs (stop) itself at step AGENT_FAIL_STEP, once
// the file AGENT_GO_FILE exists if one is named.
TEST(AgentChild, Worker) {
  const char* mode_env = std::getenv("AGENT_CHILD");
  if (mode_env == nullptr) GTEST_SKIP() << "runs only as a worker under `tessera launch` (AgentTest.*)";
  const std::string mode = mode_env;
  comm::CommOptions options;
  options.timeout = milliseconds(60000);  // a stopped peer must be found by the agent, not by a timeout
  options.calibrate = false;
  auto comm = comm::Communicator::FromEnvironment(options);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  comm::Communicator& c = **comm;
  const int attempt = EnvInt("TESSERA_RESTART_COUNT", -1);
  const std::string tag = "rank " + std::to_string(c.rank()) + " attempt " + std::to_string(attempt) + " pid " +
                          std::to_string(::getpid());
  if (attempt > 0) {
    const char* last = std::getenv("TESSERA_LAST_FAILURE");
    Say("RECOVERED " + tag + " last_failure " + (last ? last : "(none)"));
    if (c.rank() == 0) comm::ReportRestored("none", 0, EnvInt("AGENT_FAIL_STEP", 0));
  }
  const int steps = EnvInt("AGENT_STEPS", 12);
  const int fail_step = EnvInt("AGENT_FAIL_STEP", 4);
  const bool fails_now = (attempt == 0 || mode == "kill-always") && c.rank() == EnvInt("AGENT_VICTIM", 1);
  const char* go_file = std::getenv("AGENT_GO_FILE");
  for (int step = 0; step < steps; ++step) {
    float x = static_cast<float>(c.rank() + 1);
    Status st = c.AllReduce(&x, &x, 1, comm::DataType::kFloat32, comm::ReduceOp::kSum);
    ASSERT_TRUE(st.ok()) << tag << ": " << st.ToString();
    ASSERT_EQ(x, c.size() * (c.size() + 1) / 2.0f);
    if (go_file != nullptr && step == fail_step) {  // every rank holds here until the test says go
      for (int i = 0; i < 600 && ::access(go_file, F_OK) != 0; ++i) std::this_thread::sleep_for(milliseconds(100));
    }
    if (fails_now && step >= fail_step) {
      Say("FAILING " + tag + " at step " + std::to_string(step));
      ::raise(mode == "stop" ? SIGSTOP : SIGKILL);
    }
    std::this_thread::sleep_for(milliseconds(EnvInt("AGENT_STEP_MS", 100)));
  }
  ASSERT_TRUE(c.Barrier().ok());
  Say("WORKER-DONE " + tag);
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::vector<std::string> LaunchWorkers(std::vector<std::string> launch_args) {
  std::vector<std::string> argv = {TESSERA_BIN, "launch"};
  argv.insert(argv.end(), launch_args.begin(), launch_args.end());
  argv.insert(argv.end(), {"--", SelfExe(), "--gtest_filter=AgentChild.Worker"});
  return argv;
}

// The pid in "<prefix><pid>" in `text`, or -1.
long PidAfter(const std::string& text, const std::string& prefix) {
  size_t at = text.find(prefix);
  return at == std::string::npos ? -1 : std::atol(text.c_str() + at + prefix.size());
}

// The process has exited (absent, or a zombie nobody reaped yet).
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' || text[paren + 2] == 'X';
}

void ExpectEveryRankFinished(const ProcResult& r, int ranks, int attempt) {
  for (int k = 0; k < ranks; ++k) {
    EXPECT_NE(r.out.find("WORKER-DONE rank " + std::to_string(k) + " attempt " + std::to_string(attempt)),
              std::string::npos)
        << "rank " << k << "\n"
        << Diagnose(r);
  }
}

TEST(AgentTest, SigkilledRankAtStepKRestartsAndFinishes) {
  const std::string dir = TempDir("kill");
  const std::string events = dir + "/runs/agent/events.jsonl";
  ProcResult r = RunCommand(LaunchWorkers({"--nproc", "3", "--max-restarts", "1", "--heartbeat-timeout", "10",
                                           "--events", events}),
                            kRunLimit, {{"AGENT_CHILD", "kill"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  EXPECT_LT(r.seconds, 60.0) << Diagnose(r);
  const long victim = PidAfter(r.out, "FAILING rank 1 attempt 0 pid ");
  ASSERT_GT(victim, 0) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 1 (pid " + std::to_string(victim) + ") was killed by SIGKILL"), std::string::npos)
      << Diagnose(r);
  EXPECT_NE(r.err.find("restarting the ranks (restart 1 of 1)"), std::string::npos) << Diagnose(r);
  ExpectEveryRankFinished(r, 3, 1);
  EXPECT_EQ(r.out.find("WORKER-DONE rank 1 attempt 0"), std::string::npos) << Diagnose(r);
  // The restarted ranks see what failed.
  EXPECT_NE(r.out.find("\"cause\":\"killed by SIGKILL\""), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.out.find("\"pid\":" + std::to_string(victim)), std::string::npos) << Diagnose(r);
  const auto all = ReadEvents(events);
  const auto failures = OfKind(all, "failure");
  ASSERT_EQ(failures.size(), 1u) << Diagnose(r);
  EXPECT_EQ(failures[0].value("rank", -1), 1);
  EXPECT_EQ(failures[0].value("pid", -1L), victim);
  EXPECT_EQ(failures[0].value("cause", ""), "killed by SIGKILL");
  const auto restarts = OfKind(all, "restart");
  ASSERT_EQ(restarts.size(), 1u) << Diagnose(r);
  EXPECT_EQ(restarts[0].value("attempt", -1), 1);
  EXPECT_GE(restarts[0].value("seconds_since_failure", -1.0), 0.0);
  const auto restored = OfKind(all, "restored");
  ASSERT_EQ(restored.size(), 1u) << Diagnose(r);
  EXPECT_EQ(restored[0].value("source", ""), "none");
  EXPECT_GT(restored[0].value("recovery_s", -1.0), 0.0);
  const auto done = OfKind(all, "done");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].value("exit_code", -1), 0);
  EXPECT_EQ(done[0].value("restarts", -1), 1);
}

TEST(AgentTest, SigstoppedRankIsFoundByItsHeartbeatAndRestarted) {
  const std::string dir = TempDir("stop");
  const std::string events = dir + "/events.jsonl";
  ProcResult r = RunCommand(LaunchWorkers({"--nproc", "3", "--max-restarts", "1", "--heartbeat-timeout", "2",
                                           "--grace", "2", "--events", events}),
                            kRunLimit, {{"AGENT_CHILD", "stop"}});
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  const long victim = PidAfter(r.out, "FAILING rank 1 attempt 0 pid ");
  ASSERT_GT(victim, 0) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 1 (pid " + std::to_string(victim) + ") silent for "), std::string::npos)
      << Diagnose(r);
  EXPECT_NE(r.err.find("treating as hung"), std::string::npos) << Diagnose(r);
  ExpectEveryRankFinished(r, 3, 1);
  const auto failures = OfKind(ReadEvents(events), "failure");
  ASSERT_EQ(failures.size(), 1u) << Diagnose(r);
  EXPECT_EQ(failures[0].value("rank", -1), 1);
  const std::string cause = failures[0].value("cause", "");
  EXPECT_EQ(cause.rfind("silent ", 0), 0u) << cause;
  // Found within the timeout plus a few poll slices, not by a 60 s collective timeout.
  const double silent_s = std::atof(cause.c_str() + 7);
  EXPECT_GE(silent_s, 2.0) << cause;
  EXPECT_LT(silent_s, 5.0) << cause;
  EXPECT_LT(r.seconds, 45.0) << Diagnose(r);
}

TEST(AgentTest, WarmSpareTakesOverTheKilledRank) {
  const std::string dir = TempDir("spare");
  const std::string events = dir + "/events.jsonl";
  const std::string go = dir + "/go";
  Subprocess launcher(LaunchWorkers({"--nproc", "2", "--max-restarts", "1", "--spares", "1",
                                     "--heartbeat-timeout", "10", "--events", events}),
                      {{"AGENT_CHILD", "kill"}, {"AGENT_GO_FILE", go}, {"AGENT_STEPS", "8"}});
  // The victim holds the ranks at step k until the spare is ready.
  ASSERT_TRUE(launcher.WaitForOutput("is ready", milliseconds(30000))) << launcher.out() << launcher.err();
  const long spare = PidAfter(launcher.err(), "spare 0 (pid ");
  ASSERT_GT(spare, 0) << launcher.err();
  { std::ofstream(go) << "go\n"; }
  ProcResult r = launcher.Finish(kRunLimit);
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  EXPECT_NE(r.err.find("rank 1 replaced by spare (pid " + std::to_string(spare) + ")"), std::string::npos)
      << Diagnose(r);
  // Rank 1 of the second attempt is the spare's process, not a new one.
  EXPECT_NE(r.out.find("WORKER-DONE rank 1 attempt 1 pid " + std::to_string(spare)), std::string::npos)
      << Diagnose(r);
  ExpectEveryRankFinished(r, 2, 1);
  const auto all = ReadEvents(events);
  const auto assigned = OfKind(all, "spare_assigned");
  ASSERT_EQ(assigned.size(), 1u) << Diagnose(r);
  EXPECT_EQ(assigned[0].value("rank", -1), 1);
  EXPECT_EQ(assigned[0].value("pid", -1L), spare);
  // No restarts remain after the first: no new spare.
  EXPECT_EQ(OfKind(all, "spare_ready").size(), 1u) << Diagnose(r);
}

TEST(AgentTest, WithoutRestartsAFailureEndsTheJobAsBefore) {
  ProcResult r = RunCommand(LaunchWorkers({"--nproc", "2", "--heartbeat-timeout", "10"}), kRunLimit,
                            {{"AGENT_CHILD", "kill"}});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << Diagnose(r);
  EXPECT_NE(r.err.find("SIGKILL <- first failure"), std::string::npos) << Diagnose(r);
  EXPECT_EQ(r.err.find("restarting"), std::string::npos) << Diagnose(r);
  EXPECT_EQ(r.out.find("WORKER-DONE"), std::string::npos) << Diagnose(r);
}

TEST(AgentTest, GivesUpAfterMaxRestarts) {
  const std::string dir = TempDir("giveup");
  const std::string events = dir + "/events.jsonl";
  ProcResult r = RunCommand(LaunchWorkers({"--nproc", "2", "--max-restarts", "2", "--heartbeat-timeout", "10",
                                           "--events", events}),
                            kRunLimit, {{"AGENT_CHILD", "kill-always"}, {"AGENT_FAIL_STEP", "1"}});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << Diagnose(r);
  EXPECT_NE(r.err.find("giving up after 2 restarts"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.err.find("SIGKILL <- first failure"), std::string::npos) << Diagnose(r);
  const auto all = ReadEvents(events);
  EXPECT_EQ(OfKind(all, "failure").size(), 3u) << Diagnose(r);
  EXPECT_EQ(OfKind(all, "restart").size(), 2u) << Diagnose(r);
  EXPECT_EQ(OfKind(all, "gave_up").size(), 1u) << Diagnose(r);
}

TEST(AgentTest, WorkerThatNeverHeartbeatsIsNotKilled) {
  // `sh` is no Tessera worker: it never heartbeats, so a short timeout
  // must not count its quiet seconds as a hang.
  ProcResult r = RunCommand({TESSERA_BIN, "launch", "--nproc", "2", "--heartbeat-timeout", "0.5", "--", "/bin/sh",
                             "-c", "sleep 2; echo \"slept $TESSERA_RESTART_COUNT\""},
                            kRunLimit);
  ASSERT_EQ(r.exit_code, 0) << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 0] slept 0"), std::string::npos) << Diagnose(r);
  EXPECT_NE(r.out.find("[rank 1] slept 0"), std::string::npos) << Diagnose(r);
  EXPECT_EQ(r.err.find("silent"), std::string::npos) << Diagnose(r);
}

TEST(AgentTest, TwoNodeJobRestartsInLockstep) {
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  const std::map<std::string, std::string> env = {{"AGENT_CHILD", "kill"},
                                                  {"AGENT_VICTIM", "3"},
                                                  {"TESSERA_JOB_TOKEN", "agent-two-node-token-0123456789"}};
  const std::vector<std::string> common = {"--nproc", "2", "--nnodes", "2", "--master", master,
                                           "--max-restarts", "1", "--heartbeat-timeout", "10"};
  auto args = [&](const std::string& node) {
    std::vector<std::string> a = common;
    a.insert(a.end(), {"--node-rank", node});
    return a;
  };
  Subprocess node0(LaunchWorkers(args("0")), env);
  Subprocess node1(LaunchWorkers(args("1")), env);
  ProcResult r1 = node1.Finish(kRunLimit);
  ProcResult r0 = node0.Finish(kRunLimit);
  ASSERT_EQ(r0.exit_code, 0) << Diagnose(r0) << "\n=== node 1\n" << Diagnose(r1);
  ASSERT_EQ(r1.exit_code, 0) << Diagnose(r1) << "\n=== node 0\n" << Diagnose(r0);
  EXPECT_NE(r1.err.find("rank 3 (pid"), std::string::npos) << Diagnose(r1);
  EXPECT_NE(r0.err.find("another node failed (node 1: rank 3"), std::string::npos) << Diagnose(r0);
  for (int k : {0, 1}) {
    EXPECT_NE(r0.out.find("WORKER-DONE rank " + std::to_string(k) + " attempt 1"), std::string::npos)
        << Diagnose(r0);
  }
  for (int k : {2, 3}) {
    EXPECT_NE(r1.out.find("WORKER-DONE rank " + std::to_string(k) + " attempt 1"), std::string::npos)
        << Diagnose(r1);
  }
}

TEST(AgentTest, NodeThatFinishedEarlyIsNotTakenForLost) {
  // Node 1's ranks finish at once and its agent exits; node 0's run 3 s
  // longer, past the 1 s heartbeat timeout: that silence is no failure.
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  const std::map<std::string, std::string> env = {{"TESSERA_JOB_TOKEN", "agent-two-node-token-0123456789"}};
  auto launch = [&](const std::string& node) {
    return std::vector<std::string>{TESSERA_BIN, "launch", "--nproc", "1", "--nnodes", "2", "--node-rank", node,
                                    "--master", master, "--heartbeat-timeout", "1", "--", "/bin/sh", "-c",
                                    "if [ \"$TESSERA_NODE_RANK\" = 0 ]; then sleep 3; fi; echo finished"};
  };
  Subprocess node0(launch("0"), env);
  Subprocess node1(launch("1"), env);
  ProcResult r1 = node1.Finish(kRunLimit);
  ProcResult r0 = node0.Finish(kRunLimit);
  ASSERT_EQ(r1.exit_code, 0) << Diagnose(r1);
  ASSERT_EQ(r0.exit_code, 0) << Diagnose(r0);
  EXPECT_NE(r0.out.find("[rank 0] finished"), std::string::npos) << Diagnose(r0);
  EXPECT_EQ(r0.err.find("stopped responding"), std::string::npos) << Diagnose(r0);
}

TEST(AgentTest, KilledAgentOfOneNodeIsReportedByTheOther) {
  const std::string master = "127.0.0.1:" + std::to_string(FreePort());
  const std::map<std::string, std::string> env = {{"TESSERA_JOB_TOKEN", "agent-two-node-token-0123456789"}};
  auto launch = [&](const std::string& node) {
    return std::vector<std::string>{TESSERA_BIN, "launch", "--nproc", "1", "--nnodes", "2", "--node-rank", node,
                                    "--master", master, "--heartbeat-timeout", "2", "--", "/bin/sh", "-c",
                                    "echo \"up pid $$\"; exec sleep 60"};
  };
  Subprocess node0(launch("0"), env);
  Subprocess node1(launch("1"), env);
  ASSERT_TRUE(node1.WaitForOutput("[rank 1] up pid ", milliseconds(30000))) << node1.out() << node1.err();
  ASSERT_TRUE(node0.WaitForOutput("[rank 0] up pid ", milliseconds(30000))) << node0.out() << node0.err();
  const pid_t orphan = static_cast<pid_t>(PidAfter(node1.out(), "[rank 1] up pid "));
  ASSERT_GT(orphan, 0);
  std::this_thread::sleep_for(milliseconds(500));  // both agents have beaten
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(node1.pid(), SIGKILL), 0);
  ProcResult r0 = node0.Finish(kRunLimit);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_NE(r0.exit_code, 0) << Diagnose(r0);
  EXPECT_FALSE(r0.timed_out) << Diagnose(r0);
  EXPECT_NE(r0.err.find("node 1's agent stopped responding (no agent heartbeat for"), std::string::npos)
      << Diagnose(r0);
  // Timeout 2 s + a check period + stopping the local rank: well under 15 s.
  EXPECT_LT(after, 15.0) << Diagnose(r0);
  node1.Finish(milliseconds(5000));
  // The dead agent's rank did not outlive it (PR_SET_PDEATHSIG).
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = Gone(orphan);
    if (!gone) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(gone) << "rank 1 (pid " << orphan << ") outlived its killed agent";
}

}  // namespace
}  // namespace tessera

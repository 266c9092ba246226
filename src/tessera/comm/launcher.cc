// RunLaunch: the `tessera launch` job loop (see launcher.h).
#include "tessera/comm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/auth.h"
#include "tessera/comm/job_env.h"
#include "tessera/comm/launcher_process.h"
#include "tessera/comm/store_wire.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm {

using launch::LineRelay;
using launch::SignalName;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kFailedKey = "tessera-launch/failed";
constexpr auto kPollSlice = std::chrono::milliseconds(100);
constexpr auto kRemoteCheckEvery = std::chrono::milliseconds(250);
constexpr auto kDrainAfterExit = std::chrono::milliseconds(1000);
constexpr auto kReapAfterKill = std::chrono::milliseconds(5000);
constexpr int kMaxLocalRanks = 4096;

struct LocalRank {
  RankOutcome outcome;
  Clock::time_point start;
  int pipe_fd[2] = {-1, -1};  // read ends: stdout, stderr
  std::unique_ptr<LineRelay> relay[2];
};

std::string Describe(const RankOutcome& r) {
  if (!r.exited) return "still running (could not be stopped)";
  std::string text;
  if (r.signal != 0) {
    text = fmt::format("{}{}", SignalName(r.signal), r.signalled_by_launcher ? " (sent by launcher)" : "");
  } else {
    text = fmt::format("exit {}{}", r.exit_code, r.signalled_by_launcher && r.exit_code != 0 ? " (after stop)" : "");
  }
  return r.first_failure ? text + " <- first failure" : text;
}

bool Failed(const RankOutcome& r) { return r.exited && (r.signal != 0 || r.exit_code != 0); }

Status Validate(const LaunchOptions& o) {
  if (o.nproc < 1 || o.nproc > kMaxLocalRanks) {
    return InvalidArgument("--nproc {} out of range 1..{}", o.nproc, kMaxLocalRanks);
  }
  if (o.nnodes < 1) return InvalidArgument("--nnodes {} must be at least 1", o.nnodes);
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidArgument("--node-rank {} out of range 0..{} for --nnodes {}", o.node_rank, o.nnodes - 1, o.nnodes);
  }
  if (o.nnodes > 1 && (o.master_addr.empty() || o.master_port <= 0)) {
    return InvalidArgument("--nnodes {} needs --master ADDR:PORT (node 0's address and the store port)", o.nnodes);
  }
  if (o.master_port < 0 || o.master_port > 65535) return InvalidArgument("master port {} out of range", o.master_port);
  if (o.command.empty()) {
    return InvalidArgument("no command to launch (usage: tessera launch --nproc N -- CMD ARGS...)");
  }
  if (o.grace.count() < 0 || o.job_timeout.count() < 0 || o.connect_timeout.count() <= 0) {
    return InvalidArgument("timeouts must be non-negative (and the connect timeout positive)");
  }
  return Status::Ok();
}

class Launch {
 public:
  Launch(const LaunchOptions& o, EnvMap env) : o_(o), env_(std::move(env)) {}

  StatusOr<LaunchResult> Run();

 private:
  Status SetUpStore();
  Status SpawnAll(const std::string& path);
  void Loop();
  void ReadPipe(LocalRank& r, int which);
  void ClosePipe(LocalRank& r, int which);
  void Reap();
  void BeginStop(int sig, const std::string& reason);
  void KillAll(int sig);
  void Say(const std::string& text);
  void FinishMultiNode();
  bool AllExited() const;
  bool AllPipesClosed() const;

  const LaunchOptions& o_;
  EnvMap env_;
  std::string token_;
  bool fresh_token_ = false;
  std::string master_addr_;
  int master_port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> client_;
  std::unique_ptr<launch::SignalCatcher> catcher_;
  std::vector<LocalRank> ranks_;

  enum class Phase { kRunning, kTerminating, kKilling } phase_ = Phase::kRunning;
  Clock::time_point kill_at_{};
  int launcher_signal_ = 0;
  bool timed_out_ = false;
  int first_failure_ = -1;  // index into ranks_
  std::string reason_;
};

void Launch::Say(const std::string& text) {
  std::string line = "tessera launch: " + text + "\n";
  launch::WriteAll(o_.stderr_fd, line.data(), line.size());
}

Status Launch::SetUpStore() {
  if (!o_.token.empty()) {
    token_ = o_.token;
    TESSERA_RETURN_IF_ERROR(ValidateJobToken(token_, "--token"));
  } else if (auto it = env_.find("TESSERA_JOB_TOKEN"); it != env_.end() && !it->second.empty()) {
    token_ = it->second;
    TESSERA_RETURN_IF_ERROR(ValidateJobToken(token_, "TESSERA_JOB_TOKEN"));
  } else if (o_.node_rank == 0) {
    TESSERA_ASSIGN_OR_RETURN(token_, GenerateJobToken());
    fresh_token_ = true;
  } else {
    return InvalidArgument(
        "node {} needs the job token of node 0: pass --token or export TESSERA_JOB_TOKEN (node 0 prints it when "
        "it generates one)",
        o_.node_rank);
  }
  master_addr_ = o_.master_addr.empty() ? "127.0.0.1" : o_.master_addr;
  master_port_ = o_.master_port;
  if (o_.node_rank == 0) {
    server_ = std::make_unique<TcpStoreServer>(token_);
    // One node and no --master: loopback only. Otherwise every interface.
    auto port = server_->Start(o_.master_addr.empty() ? "127.0.0.1" : "", o_.master_port);
    if (!port.ok()) return port.status().WithContext("while starting the job store in the launcher");
    master_port_ = *port;
    if (fresh_token_ && o_.nnodes > 1) {
      Say(fmt::format("job token for the other nodes (--token or TESSERA_JOB_TOKEN): {}", token_));
    }
  }
  if (o_.nnodes > 1) {
    TcpStoreClientOptions co;
    co.connect_timeout = o_.connect_timeout;
    co.op_timeout = std::min(o_.connect_timeout, Timeout(60000));
    co.client_info = fmt::format("launcher of node {}/{}", o_.node_rank, o_.nnodes);
    auto c = TcpStoreClient::Connect(o_.node_rank == 0 ? "127.0.0.1" : master_addr_, master_port_, token_, co);
    if (!c.ok()) return c.status().WithContext(fmt::format("while node {} joins the job store", o_.node_rank));
    client_ = *c;
  }
  return Status::Ok();
}

Status Launch::SpawnAll(const std::string& path) {
  const int world = o_.nnodes * o_.nproc;
  std::map<std::string, std::string> overrides = {
      {"WORLD_SIZE", std::to_string(world)},
      {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc)},
      {"MASTER_ADDR", master_addr_},
      {"MASTER_PORT", std::to_string(master_port_)},
      {"TESSERA_JOB_TOKEN", token_},
      {"TESSERA_STORE_HOSTED", "1"},
      {"TESSERA_NODE_RANK", std::to_string(o_.node_rank)},
      {"TESSERA_NUM_NODES", std::to_string(o_.nnodes)},
  };
  // The ranks write into pipes; tell them when those end on a terminal, so
  // a progress bar can redraw in place (LineRelay relays '\r' redraws).
  if (::isatty(o_.stdout_fd)) overrides.emplace(std::string("TESSERA_TERMINAL"), std::string(1, '1'));
  ranks_.resize(o_.nproc);
  for (int local = 0; local < o_.nproc; ++local) {
    LocalRank& r = ranks_[local];
    const int rank = o_.node_rank * o_.nproc + local;
    r.outcome.rank = rank;
    std::map<std::string, std::string> env = env_;
    for (const auto& [k, v] : overrides) env[k] = v;
    env["RANK"] = std::to_string(rank);
    env["LOCAL_RANK"] = std::to_string(local);
    std::vector<std::string> env_list;
    env_list.reserve(env.size());
    for (const auto& [k, v] : env) env_list.push_back(k + "=" + v);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return IoError("pipe2: {}", std::strerror(errno));
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      return IoError("pipe2: {}", std::strerror(errno));
    }
    auto pid = launch::SpawnInNewGroup(path, o_.command, env_list, out[1], err[1]);
    ::close(out[1]);
    ::close(err[1]);
    if (!pid.ok()) {
      ::close(out[0]);
      ::close(err[0]);
      ranks_.resize(local);
      return pid.status().WithContext(fmt::format("while starting rank {}", rank));
    }
    r.outcome.pid = *pid;
    r.start = Clock::now();
    r.pipe_fd[0] = out[0];
    r.pipe_fd[1] = err[0];
    for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    const std::string prefix = o_.prefix_output ? fmt::format("[rank {}] ", rank) : "";
    r.relay[0] = std::make_unique<LineRelay>(prefix, o_.stdout_fd);
    r.relay[1] = std::make_unique<LineRelay>(prefix, o_.stderr_fd);
  }
  return Status::Ok();
}

void Launch::ClosePipe(LocalRank& r, int which) {
  if (r.pipe_fd[which] < 0) return;
  r.relay[which]->Finish();
  ::close(r.pipe_fd[which]);
  r.pipe_fd[which] = -1;
}

void Launch::ReadPipe(LocalRank& r, int which) {
  char buf[65536];
  for (int i = 0; i < 16; ++i) {  // bounded per turn: one chatty rank cannot starve the others
    ssize_t n = ::read(r.pipe_fd[which], buf, sizeof(buf));
    if (n > 0) {
      r.relay[which]->Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    ClosePipe(r, which);  // EOF or error
    return;
  }
}

void Launch::KillAll(int sig) {
  for (LocalRank& r : ranks_) {
    if (r.outcome.exited) continue;
    ::kill(-r.outcome.pid, sig);
    r.outcome.signalled_by_launcher = true;
  }
}

void Launch::BeginStop(int sig, const std::string& reason) {
  if (phase_ != Phase::kRunning) return;
  reason_ = reason;
  const bool any_running = !AllExited();
  if (any_running) {
    Say(fmt::format("{}; sending {} to the running ranks (SIGKILL after {} ms)", reason, SignalName(sig),
                    o_.grace.count()));
  }
  phase_ = Phase::kTerminating;
  kill_at_ = Clock::now() + o_.grace;
  KillAll(sig);
  if (client_ && first_failure_ >= 0) {
    Status st = client_->SetString(kFailedKey, fmt::format("node {}: {}", o_.node_rank, reason));
    if (!st.ok()) TLOG(WARN, "could not report the failure to the other nodes: {}", st.ToString());
  }
}

void Launch::Reap() {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    LocalRank& r = ranks_[i];
    if (r.outcome.exited) continue;
    int status = 0;
    pid_t p = ::waitpid(r.outcome.pid, &status, WNOHANG);
    if (p != r.outcome.pid) continue;
    r.outcome.exited = true;
    r.outcome.runtime_s = std::chrono::duration<double>(Clock::now() - r.start).count();
    if (WIFSIGNALED(status)) {
      r.outcome.signal = WTERMSIG(status);
    } else {
      r.outcome.exit_code = WEXITSTATUS(status);
    }
    if (Failed(r.outcome) && phase_ == Phase::kRunning) {
      first_failure_ = static_cast<int>(i);
      r.outcome.first_failure = true;
      BeginStop(SIGTERM, r.outcome.signal != 0
                             ? fmt::format("rank {} (pid {}) was killed by {}", r.outcome.rank, r.outcome.pid,
                                           SignalName(r.outcome.signal))
                             : fmt::format("rank {} (pid {}) exited with code {}", r.outcome.rank, r.outcome.pid,
                                           r.outcome.exit_code));
    }
  }
}

bool Launch::AllExited() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const LocalRank& r) { return r.outcome.exited; });
}

bool Launch::AllPipesClosed() const {
  return std::all_of(ranks_.begin(), ranks_.end(),
                     [](const LocalRank& r) { return r.pipe_fd[0] < 0 && r.pipe_fd[1] < 0; });
}

void Launch::Loop() {
  const auto start = Clock::now();
  const auto job_deadline =
      o_.job_timeout.count() > 0 ? start + o_.job_timeout : Clock::time_point::max();
  auto next_remote_check = start + kRemoteCheckEvery;
  std::optional<Clock::time_point> drain_until;
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, int>> owners;
  for (;;) {
    fds.clear();
    owners.clear();
    fds.push_back({catcher_->read_fd(), POLLIN, 0});
    for (size_t i = 0; i < ranks_.size(); ++i) {
      for (int w = 0; w < 2; ++w) {
        if (ranks_[i].pipe_fd[w] < 0) continue;
        fds.push_back({ranks_[i].pipe_fd[w], POLLIN, 0});
        owners.emplace_back(i, w);
      }
    }
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(kPollSlice.count()));
    if (rc > 0) {
      for (size_t k = 1; k < fds.size(); ++k) {
        if (fds[k].revents != 0) ReadPipe(ranks_[owners[k - 1].first], owners[k - 1].second);
      }
    }
    for (int sig : catcher_->Drain()) {
      if (phase_ == Phase::kRunning) {
        launcher_signal_ = sig;
        BeginStop(sig, fmt::format("received {}", SignalName(sig)));
      } else if (phase_ != Phase::kKilling) {
        Say(fmt::format("received {} again; sending SIGKILL", SignalName(sig)));
        KillAll(SIGKILL);
        phase_ = Phase::kKilling;
        kill_at_ = Clock::now();
      }
    }
    Reap();
    const auto now = Clock::now();
    if (phase_ == Phase::kRunning && now >= job_deadline) {
      timed_out_ = true;
      BeginStop(SIGTERM, fmt::format("the job exceeded --timeout ({} s)", o_.job_timeout.count() / 1000.0));
    }
    if (phase_ == Phase::kRunning && client_ && now >= next_remote_check) {
      next_remote_check = now + kRemoteCheckEvery;
      auto failed = client_->GetString(kFailedKey, Timeout(0));
      if (failed.ok()) {
        BeginStop(SIGTERM, "another node failed (" + *failed + ")");
      } else if (failed.status().code() != StatusCode::kDeadlineExceeded) {
        BeginStop(SIGTERM, "lost the job store: " + failed.status().message());
      }
    }
    if (phase_ == Phase::kTerminating && now >= kill_at_ && !AllExited()) {
      Say(fmt::format("ranks still running {} ms after the stop began; sending SIGKILL", o_.grace.count()));
      KillAll(SIGKILL);
      phase_ = Phase::kKilling;
      kill_at_ = now;
    }
    if (AllExited()) {
      if (AllPipesClosed()) return;
      if (!drain_until) drain_until = now + kDrainAfterExit;
      if (now >= *drain_until) {  // stray grandchildren hold the pipes: stop relaying
        for (LocalRank& r : ranks_) {
          ClosePipe(r, 0);
          ClosePipe(r, 1);
        }
        return;
      }
    } else if (phase_ == Phase::kKilling && now >= kill_at_ + kReapAfterKill) {
      Say("some ranks did not exit after SIGKILL (uninterruptible sleep?); giving up on them");
      for (LocalRank& r : ranks_) {
        ClosePipe(r, 0);
        ClosePipe(r, 1);
      }
      return;
    }
  }
}

void Launch::FinishMultiNode() {
  if (!client_) return;
  const std::string key = fmt::format("tessera-launch/done/{}", o_.node_rank);
  Status st = client_->SetString(key, "1");
  if (!st.ok() || o_.node_rank != 0) return;
  // Node 0 hosts the store: keep it up until every node is done (bounded).
  std::vector<std::string> keys;
  for (int n = 0; n < o_.nnodes; ++n) keys.push_back(fmt::format("tessera-launch/done/{}", n));
  const auto deadline = Clock::now() + o_.connect_timeout;
  while (Clock::now() < deadline) {
    st = client_->Wait(keys, Timeout(250));
    if (st.code() != StatusCode::kDeadlineExceeded) break;
    if (!catcher_->Drain().empty()) break;
  }
  if (!st.ok()) Say("not every node reported completion; closing the job store anyway: " + st.message());
}

StatusOr<LaunchResult> Launch::Run() {
  std::string path_env = env_.count("PATH") ? env_["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  TESSERA_ASSIGN_OR_RETURN(std::string path, launch::ResolveCommand(o_.command[0], path_env));
  catcher_ = std::make_unique<launch::SignalCatcher>();
  TESSERA_RETURN_IF_ERROR(catcher_->status());
  TESSERA_RETURN_IF_ERROR(SetUpStore());
  Status spawned = SpawnAll(path);
  if (!spawned.ok()) {
    BeginStop(SIGTERM, "could not start every rank");
    Loop();
    return spawned;
  }
  TLOG(INFO, "launched {} ranks of `{}` (node {}/{}, store {}:{})", ranks_.size(), o_.command[0], o_.node_rank,
       o_.nnodes, master_addr_, master_port_);
  Loop();
  FinishMultiNode();
  if (server_) server_->Stop();

  LaunchResult result;
  for (const LocalRank& r : ranks_) result.ranks.push_back(r.outcome);
  result.reason = reason_;
  if (launcher_signal_ != 0) {
    result.exit_code = 128 + launcher_signal_;
  } else if (timed_out_) {
    result.exit_code = 124;
  } else if (first_failure_ >= 0) {
    const RankOutcome& f = ranks_[first_failure_].outcome;
    result.exit_code = f.signal != 0 ? 128 + f.signal : f.exit_code;
  } else if (!reason_.empty()) {
    result.exit_code = 1;  // another node failed or the store was lost
  } else if (!AllExited()) {
    result.exit_code = 1;
    result.reason = "ranks could not be reaped";
  }
  if (result.exit_code != 0) {
    std::string summary = FormatLaunchSummary(result);
    launch::WriteAll(o_.stderr_fd, summary.data(), summary.size());
  }
  return result;
}

}  // namespace

Status ParseHostPort(const std::string& text, std::string* host, int* port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("'{}' is not [IPv6]:PORT", text);
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) {
      return InvalidArgument("'{}' is not HOST:PORT (IPv6: [ADDR]:PORT)", text);
    }
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  int v = 0;
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (h.empty() || p.empty() || ec != std::errc() || ptr != p.data() + p.size() || v < 0 || v > 65535) {
    return InvalidArgument("'{}' is not HOST:PORT with a port in 0..65535", text);
  }
  *host = h;
  *port = v;
  return Status::Ok();
}

std::string FormatLaunchSummary(const LaunchResult& result) {
  std::string out = fmt::format("tessera launch: job failed{}{} (exit code {})\n",
                                result.reason.empty() ? "" : ": ", result.reason, result.exit_code);
  out += fmt::format("  {:>5}  {:>8}  {:<36}  {:>10}\n", "rank", "pid", "status", "runtime");
  for (const RankOutcome& r : result.ranks) {
    out += fmt::format("  {:>5}  {:>8}  {:<36}  {:>8.2f} s\n", r.rank, r.pid, Describe(r), r.runtime_s);
  }
  return out;
}

StatusOr<LaunchResult> RunLaunch(const LaunchOptions& options) {
  TESSERA_RETURN_IF_ERROR(Validate(options));
  Launch launch(options, ProcessEnv());
  return launch.Run();
}

}  // namespace tessera::comm

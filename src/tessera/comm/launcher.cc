// RunLaunch: options, the job store and the result of `tessera launch`
// (see launcher.h); the agent that runs the ranks is launcher_agent.h.
#include "tessera/comm/launcher.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <random>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tessera/comm/auth.h"
#include "tessera/comm/job_env.h"
#include "tessera/comm/launcher_agent.h"
#include "tessera/comm/launcher_process.h"
#include "tessera/comm/tcp_store.h"

namespace tessera::comm {

using launch::SignalName;

namespace {

constexpr int kMaxLocalRanks = 4096;
constexpr int kMaxSpares = 1024;

std::string Describe(const RankOutcome& r) {
  if (!r.exited) return "still running (could not be stopped)";
  std::string text;
  if (r.signal != 0) {
    text = fmt::format("{}{}", SignalName(r.signal), r.signalled_by_launcher ? " (sent by launcher)" : "");
    if (r.silent_s > 0) text = fmt::format("silent {:.1f} s, {}", r.silent_s, text);
  } else {
    text = fmt::format("exit {}{}", r.exit_code, r.signalled_by_launcher && r.exit_code != 0 ? " (after stop)" : "");
  }
  return r.first_failure ? text + " <- first failure" : text;
}

Status Validate(const LaunchOptions& o) {
  if (o.nproc < 1 || o.nproc > kMaxLocalRanks) {
    return InvalidArgument("--nproc {} out of range 1..{}", o.nproc, kMaxLocalRanks);
  }
  if (o.nnodes < 1) return InvalidArgument("--nnodes {} must be at least 1", o.nnodes);
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return InvalidArgument("--node-rank {} out of range 0..{} for --nnodes {}", o.node_rank, o.nnodes - 1, o.nnodes);
  }
  if (o.elastic && (o.nnodes < 2 || o.min_nnodes < 1 || o.min_nnodes > o.nnodes)) {
    return InvalidArgument("--nnodes {}:{} must have 1 <= MIN <= MAX and MAX >= 2 (one node: a plain --nnodes 1)",
                           o.min_nnodes, o.nnodes);
  }
  if (o.elastic && o.elastic_wait.count() < 0) return InvalidArgument("--elastic-wait must be >= 0");
  if (o.nnodes > 1 && (o.master_addr.empty() || o.master_port <= 0)) {
    return InvalidArgument("--nnodes {} needs --master ADDR:PORT (node 0's address and the store port)",
                           o.elastic ? fmt::format("{}:{}", o.min_nnodes, o.nnodes) : std::to_string(o.nnodes));
  }
  if (o.master_port < 0 || o.master_port > 65535) return InvalidArgument("master port {} out of range", o.master_port);
  if (o.command.empty()) {
    return InvalidArgument("no command to launch (usage: tessera launch --nproc N -- CMD ARGS...)");
  }
  if (o.grace.count() < 0 || o.job_timeout.count() < 0 || o.connect_timeout.count() <= 0) {
    return InvalidArgument("timeouts must be non-negative (and the connect timeout positive)");
  }
  if (o.max_restarts < 0) return InvalidArgument("--max-restarts {} must be >= 0", o.max_restarts);
  if (o.spares < 0 || o.spares > kMaxSpares) {
    return InvalidArgument("--spares {} out of range 0..{}", o.spares, kMaxSpares);
  }
  if (o.heartbeat_timeout.count() < 0 || o.heartbeat_interval.count() < 0) {
    return InvalidArgument("--heartbeat-timeout and --heartbeat-interval must be >= 0");
  }
  if (o.heartbeat_timeout.count() > 0 && o.heartbeat_interval >= o.heartbeat_timeout) {
    return InvalidArgument("--heartbeat-interval ({} ms) must be shorter than --heartbeat-timeout ({} ms)",
                           o.heartbeat_interval.count(), o.heartbeat_timeout.count());
  }
  return Status::Ok();
}

void Say(const LaunchOptions& o, const std::string& text) {
  std::string line = "tessera launch: " + text + "\n";
  launch::WriteAll(o.stderr_fd, line.data(), line.size());
}

// A TCP port free right now on `loopback_only ? 127.0.0.1 : every interface`
// for PyTorch's rank 0 to serve its own TCPStore on (MASTER_PORT). Closed
// again at once, without a connection, so it lingers in no TIME_WAIT. Drawn
// below Linux's ephemeral range (ip_local_port_range), so that no outgoing
// connection of another process is handed the same port before PyTorch
// binds it; the kernel's own choice (port 0, as torchrun --standalone does)
// only if no drawn port is free.
StatusOr<int> PickFreeTcpPort(bool loopback_only) {
  auto try_bind = [&](int port) -> int {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(loopback_only ? INADDR_LOOPBACK : INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    socklen_t len = sizeof(a);
    int got = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      got = ntohs(a.sin_port);
    }
    ::close(fd);
    return got;
  };
  int ephemeral_low = 32768;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int low = 0, high = 0;
    if (std::fscanf(f, "%d %d", &low, &high) == 2 && low > 2048) ephemeral_low = low;
    std::fclose(f);
  }
  constexpr int kLowest = 20000;  // above well-known and most registered service ports
  if (ephemeral_low - kLowest >= 1000) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> pick(kLowest, ephemeral_low - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const int port = try_bind(pick(rng));
      if (port > 0) return port;
    }
  }
  const int port = try_bind(0);
  if (port <= 0) return Unavailable("could not find a free TCP port for MASTER_PORT (PyTorch's store): errno {}", errno);
  return port;
}

constexpr char kTorchPortKey[] = "tessera_launch/torch_master_port";

// The job token and the store: hosted here on node 0, joined on the other
// nodes (multi-node jobs only need a client here).
Status SetUpStore(const LaunchOptions& o, const EnvMap& env, launch::AgentStore* store) {
  bool fresh_token = false;
  if (!o.token.empty()) {
    store->token = o.token;
    TESSERA_RETURN_IF_ERROR(ValidateJobToken(store->token, "--token"));
  } else if (auto it = env.find("TESSERA_JOB_TOKEN"); it != env.end() && !it->second.empty()) {
    store->token = it->second;
    TESSERA_RETURN_IF_ERROR(ValidateJobToken(store->token, "TESSERA_JOB_TOKEN"));
  } else if (o.node_rank == 0) {
    TESSERA_ASSIGN_OR_RETURN(store->token, GenerateJobToken());
    fresh_token = true;
  } else {
    return InvalidArgument(
        "node {} needs the job token of node 0: pass --token or export TESSERA_JOB_TOKEN (node 0 prints it when "
        "it generates one)",
        o.node_rank);
  }
  store->master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  store->master_port = o.master_port;
  if (o.node_rank == 0) {
    store->server = std::make_unique<TcpStoreServer>(store->token);
    // One node and no --master: loopback only. Otherwise every interface.
    auto port = store->server->Start(o.master_addr.empty() ? "127.0.0.1" : "", o.master_port);
    if (!port.ok()) return port.status().WithContext("while starting the job store in the launcher");
    store->master_port = *port;
    if (fresh_token && o.nnodes > 1) {
      Say(o, fmt::format("job token for the other nodes (--token or TESSERA_JOB_TOKEN): {}", store->token));
    }
  }
  if (o.nnodes > 1) {
    TcpStoreClientOptions co;
    co.connect_timeout = o.connect_timeout;
    co.op_timeout = std::min(o.connect_timeout, Timeout(60000));
    co.client_info = fmt::format("launcher of node {}/{}", o.node_rank, o.nnodes);
    auto c = TcpStoreClient::Connect(o.node_rank == 0 ? "127.0.0.1" : store->master_addr, store->master_port,
                                     store->token, co);
    if (!c.ok()) return c.status().WithContext(fmt::format("while node {} joins the job store", o.node_rank));
    store->client = *c;
  }
  // MASTER_PORT for PyTorch (torch.distributed env://): node 0 picks it and
  // tells the other nodes through the job store.
  if (o.node_rank == 0) {
    TESSERA_ASSIGN_OR_RETURN(store->torch_master_port, PickFreeTcpPort(o.master_addr.empty()));
    if (store->client) {
      TESSERA_RETURN_IF_ERROR(store->client->SetString(kTorchPortKey, std::to_string(store->torch_master_port))
                                  .WithContext("while node 0 publishes MASTER_PORT"));
    }
  } else {
    auto v = store->client->GetString(kTorchPortKey, o.connect_timeout);
    if (!v.ok()) return v.status().WithContext(fmt::format("while node {} reads MASTER_PORT from node 0", o.node_rank));
    int port = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), port);
    if (ec != std::errc() || ptr != v->data() + v->size() || port <= 0 || port > 65535) {
      return Internal("node 0 published MASTER_PORT '{}' under {}: not a port", *v, kTorchPortKey);
    }
    store->torch_master_port = port;
  }
  return Status::Ok();
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
  EnvMap env = ProcessEnv();
  std::string path_env = env.count("PATH") ? env["PATH"] : "/usr/local/bin:/usr/bin:/bin";
  TESSERA_ASSIGN_OR_RETURN(std::string path, launch::ResolveCommand(options.command[0], path_env));
  launch::SignalCatcher catcher;
  TESSERA_RETURN_IF_ERROR(catcher.status());
  launch::AgentStore store;
  TESSERA_RETURN_IF_ERROR(SetUpStore(options, env, &store));
  launch::Agent agent(options, std::move(env), std::move(path), std::move(store), &catcher);
  TESSERA_ASSIGN_OR_RETURN(LaunchResult result, agent.Run());
  if (result.exit_code != 0) {
    std::string summary = FormatLaunchSummary(result);
    launch::WriteAll(options.stderr_fd, summary.data(), summary.size());
  }
  return result;
}

}  // namespace tessera::comm

// Job description from torchrun / tessera launch, Open MPI or Slurm
// variables, and the job store connection (see job_env.h).
#include "tessera/comm/job_env.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/auth.h"
#include "tessera/comm/heartbeat.h"
#include "tessera/comm/tcp_store.h"

extern char** environ;

namespace tessera::comm {
namespace {

constexpr int kMaxWorld = 1 << 24;

// Variable names of one convention, for error messages.
struct Names {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;
};

class Env {
 public:
  explicit Env(const EnvMap& env) : env_(env) {}

  // Unset and empty are the same: "export MASTER_ADDR=" means "not given".
  std::optional<std::string> Get(const std::string& name) const {
    auto it = env_.find(name);
    if (it == env_.end() || it->second.empty()) return std::nullopt;
    return it->second;
  }
  bool Has(const std::string& name) const { return Get(name).has_value(); }

  StatusOr<int> Int(const std::string& name, int lo, int hi) const {
    std::string text = *Get(name);
    int v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      return InvalidArgument("{}='{}' is not an integer", name, text);
    }
    if (v < lo || v > hi) return InvalidArgument("{}={} is out of range {}..{}", name, v, lo, hi);
    return v;
  }

  // The first of `names` that is set, or nullptr.
  const char* FirstSet(std::initializer_list<const char*> names) const {
    for (const char* n : names) {
      if (Has(n)) return n;
    }
    return nullptr;
  }

 private:
  const EnvMap& env_;
};

uint32_t Fnv1a(std::string_view text) {
  uint32_t h = 2166136261u;
  for (char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

Status CheckConsistent(const JobEnv& job, const Names& n) {
  if (job.rank >= job.world_size) {
    return InvalidArgument("{}={} is not below {}={} (ranks are 0..{})", n.rank, job.rank, n.world, job.world_size,
                           job.world_size - 1);
  }
  if (job.local_world_size > job.world_size) {
    return InvalidArgument("{}={} exceeds {}={}", n.local_world, job.local_world_size, n.world, job.world_size);
  }
  if (job.local_rank >= 0 && job.local_world_size > 0 && job.local_rank >= job.local_world_size) {
    return InvalidArgument("{}={} is not below {}={}", n.local_rank, job.local_rank, n.local_world,
                           job.local_world_size);
  }
  if (job.local_rank > job.rank) {
    return InvalidArgument("{}={} exceeds {}={} (a local rank cannot exceed the global rank)", n.local_rank,
                           job.local_rank, n.rank, job.rank);
  }
  if (job.node_rank >= 0 && job.num_nodes > 0 && job.node_rank >= job.num_nodes) {
    return InvalidArgument("node rank {} is not below the node count {}", job.node_rank, job.num_nodes);
  }
  return Status::Ok();
}

Status ParseTorchrun(const Env& env, JobEnv& job) {
  job.source = JobEnvSource::kTorchrun;
  if (!env.Has("RANK") || !env.Has("WORLD_SIZE")) {
    return InvalidArgument("{} is set but {} is not: set both (torchrun / tessera launch style) or neither",
                           env.Has("RANK") ? "RANK" : "WORLD_SIZE", env.Has("RANK") ? "WORLD_SIZE" : "RANK");
  }
  TESSERA_ASSIGN_OR_RETURN(job.world_size, env.Int("WORLD_SIZE", 1, kMaxWorld));
  TESSERA_ASSIGN_OR_RETURN(job.rank, env.Int("RANK", 0, kMaxWorld));
  if (env.Has("LOCAL_RANK") != env.Has("LOCAL_WORLD_SIZE")) {
    return InvalidArgument("{} is set but {} is not: set both or neither",
                           env.Has("LOCAL_RANK") ? "LOCAL_RANK" : "LOCAL_WORLD_SIZE",
                           env.Has("LOCAL_RANK") ? "LOCAL_WORLD_SIZE" : "LOCAL_RANK");
  }
  if (env.Has("LOCAL_RANK")) {
    TESSERA_ASSIGN_OR_RETURN(job.local_world_size, env.Int("LOCAL_WORLD_SIZE", 1, kMaxWorld));
    TESSERA_ASSIGN_OR_RETURN(job.local_rank, env.Int("LOCAL_RANK", 0, kMaxWorld));
  } else if (job.world_size == 1) {
    job.local_rank = 0;
    job.local_world_size = 1;
  } else {
    job.local_rank = job.local_world_size = -1;
  }
  if (env.Has("TESSERA_NODE_RANK") || env.Has("TESSERA_NUM_NODES")) {
    if (!env.Has("TESSERA_NODE_RANK") || !env.Has("TESSERA_NUM_NODES")) {
      return InvalidArgument("set both TESSERA_NODE_RANK and TESSERA_NUM_NODES, or neither");
    }
    TESSERA_ASSIGN_OR_RETURN(job.num_nodes, env.Int("TESSERA_NUM_NODES", 1, kMaxWorld));
    TESSERA_ASSIGN_OR_RETURN(job.node_rank, env.Int("TESSERA_NODE_RANK", 0, kMaxWorld));
  } else if (env.Has("GROUP_RANK")) {
    TESSERA_ASSIGN_OR_RETURN(job.node_rank, env.Int("GROUP_RANK", 0, kMaxWorld));
  }
  return CheckConsistent(job, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"});
}

Status ParseOpenMpi(const Env& env, JobEnv& job, std::string* job_id) {
  job.source = JobEnvSource::kOpenMpi;
  const Names n{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE"};
  if (!env.Has(n.rank) || !env.Has(n.world)) {
    return InvalidArgument("{} is set but {} is not (is this really an Open MPI job?)",
                           env.Has(n.rank) ? n.rank : n.world, env.Has(n.rank) ? n.world : n.rank);
  }
  TESSERA_ASSIGN_OR_RETURN(job.world_size, env.Int(n.world, 1, kMaxWorld));
  TESSERA_ASSIGN_OR_RETURN(job.rank, env.Int(n.rank, 0, kMaxWorld));
  job.local_rank = job.local_world_size = -1;
  if (env.Has(n.local_rank)) {
    TESSERA_ASSIGN_OR_RETURN(job.local_rank, env.Int(n.local_rank, 0, kMaxWorld));
  }
  if (env.Has(n.local_world)) {
    TESSERA_ASSIGN_OR_RETURN(job.local_world_size, env.Int(n.local_world, 1, kMaxWorld));
  }
  if (env.Has("OMPI_MCA_orte_num_nodes")) {
    TESSERA_ASSIGN_OR_RETURN(job.num_nodes, env.Int("OMPI_MCA_orte_num_nodes", 1, kMaxWorld));
  }
  if (auto id = env.Get("OMPI_MCA_ess_base_jobid")) {
    *job_id = *id;
  } else if (auto ns = env.Get("PMIX_NAMESPACE")) {
    *job_id = *ns;
  }
  return CheckConsistent(job, n);
}

Status ParseSlurm(const Env& env, JobEnv& job, std::string* job_id) {
  job.source = JobEnvSource::kSlurm;
  const char* world_var = env.FirstSet({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"});
  if (world_var == nullptr) {
    return InvalidArgument("SLURM_PROCID is set but none of SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS is");
  }
  TESSERA_ASSIGN_OR_RETURN(job.world_size, env.Int(world_var, 1, kMaxWorld));
  TESSERA_ASSIGN_OR_RETURN(job.rank, env.Int("SLURM_PROCID", 0, kMaxWorld));
  job.local_rank = job.local_world_size = -1;
  if (env.Has("SLURM_LOCALID")) {
    TESSERA_ASSIGN_OR_RETURN(job.local_rank, env.Int("SLURM_LOCALID", 0, kMaxWorld));
  }
  if (env.Has("SLURM_NODEID")) {
    TESSERA_ASSIGN_OR_RETURN(job.node_rank, env.Int("SLURM_NODEID", 0, kMaxWorld));
  }
  if (const char* v = env.FirstSet({"SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"})) {
    TESSERA_ASSIGN_OR_RETURN(job.num_nodes, env.Int(v, 1, kMaxWorld));
  }
  const char* local_var = "SLURM_NTASKS_PER_NODE";
  if (const char* v = env.FirstSet({"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
      v != nullptr && job.node_rank >= 0) {
    local_var = v;
    auto tasks = TasksOnNode(*env.Get(v), job.node_rank);
    if (!tasks.ok()) {
      return InvalidArgument("{}='{}' with SLURM_NODEID={}: {}", v, *env.Get(v), job.node_rank,
                             tasks.status().message());
    }
    job.local_world_size = *tasks;
  } else if (env.Has("SLURM_NTASKS_PER_NODE")) {
    TESSERA_ASSIGN_OR_RETURN(job.local_world_size, env.Int("SLURM_NTASKS_PER_NODE", 1, kMaxWorld));
  }
  if (auto id = env.Get("SLURM_JOB_ID")) {
    *job_id = *id + "." + env.Get("SLURM_STEP_ID").value_or(env.Get("SLURM_STEPID").value_or("0"));
  }
  return CheckConsistent(job, {"SLURM_PROCID", world_var, "SLURM_LOCALID", local_var});
}

Status ResolveMaster(const Env& env, JobEnv& job, const std::string& job_id) {
  const bool all_local = job.world_size == 1 || job.local_world_size == job.world_size || job.num_nodes == 1;
  // `tessera launch` names its store TESSERA_STORE_ADDR/PORT and leaves
  // MASTER_ADDR/MASTER_PORT to PyTorch (torchrun's meaning).
  if (auto addr = env.Get("TESSERA_STORE_ADDR")) {
    job.master_addr = *addr;
  } else if (auto addr = env.Get("MASTER_ADDR")) {
    job.master_addr = *addr;
  } else if (all_local) {
    job.master_addr = "127.0.0.1";
  } else if (job.source == JobEnvSource::kSlurm) {
    if (const char* v = env.FirstSet({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
      auto host = FirstHostOfHostlist(*env.Get(v));
      if (!host.ok()) return InvalidArgument("{}='{}': {}", v, *env.Get(v), host.status().message());
      job.master_addr = *host;
    } else if (auto ip = env.Get("SLURM_LAUNCH_NODE_IPADDR")) {
      job.master_addr = *ip;
    } else {
      return InvalidArgument(
          "MASTER_ADDR is not set and neither SLURM_STEP_NODELIST nor SLURM_LAUNCH_NODE_IPADDR says where rank 0 "
          "runs: export MASTER_ADDR=<rank 0's host>");
    }
  } else {
    return InvalidArgument(
        "MASTER_ADDR is not set and the {} ranks ({}) may span several hosts: set MASTER_ADDR to the address of "
        "rank 0's host{}",
        job.world_size, JobEnvSourceName(job.source),
        job.source == JobEnvSource::kOpenMpi ? " (mpirun -x MASTER_ADDR=<host> -x MASTER_PORT=<port>)" : "");
  }
  if (env.Has("TESSERA_STORE_PORT")) {
    TESSERA_ASSIGN_OR_RETURN(job.master_port, env.Int("TESSERA_STORE_PORT", 1, 65535));
  } else if (env.Has("MASTER_PORT")) {
    TESSERA_ASSIGN_OR_RETURN(job.master_port, env.Int("MASTER_PORT", 1, 65535));
  } else if (!job_id.empty()) {
    // Below Linux's ephemeral range (32768+), so outgoing connections do not
    // take them; still several, in case another service holds one.
    job.master_port_candidates.clear();
    for (int k = 0; k < kDerivedPortCandidates; ++k) {
      const uint64_t h = Fnv1a(job_id + "#" + std::to_string(k));
      job.master_port_candidates.push_back(kDefaultMasterPort + static_cast<int>(h % kDerivedPortRange));
    }
    job.master_port = job.master_port_candidates.front();
  } else {
    job.master_port = kDefaultMasterPort;
  }
  return Status::Ok();
}

Status ResolveToken(const Env& env, JobEnv& job, const std::string& job_id) {
  if (auto token = env.Get("TESSERA_JOB_TOKEN")) {
    TESSERA_RETURN_IF_ERROR(ValidateJobToken(*token, "TESSERA_JOB_TOKEN"));
    job.token = *token;
    job.token_source = "TESSERA_JOB_TOKEN";
    return Status::Ok();
  }
  if (job.world_size == 1) {
    TESSERA_ASSIGN_OR_RETURN(job.token, GenerateJobToken());
    job.token_source = "generated (single process)";
    return Status::Ok();
  }
  if (job.source == JobEnvSource::kOpenMpi) {
    if (auto secret = env.Get("OMPI_MCA_orte_precondition_transports")) {
      job.token = DeriveJobToken(*secret, job_id);
      job.token_source = "derived from OMPI_MCA_orte_precondition_transports";
      return Status::Ok();
    }
  }
  return InvalidArgument(
      "no job token: TESSERA_JOB_TOKEN is not set and {} provides no per-job secret. Every rank must share one: "
      "export TESSERA_JOB_TOKEN=$(openssl rand -hex 32) before starting the job (srun passes the environment on; "
      "with mpirun add -x TESSERA_JOB_TOKEN), or start it with `tessera launch`, which generates one",
      JobEnvSourceName(job.source));
}

std::string LocalHostName() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

// Rank 0's store: the client plus the server it hosts. On destruction the
// server lingers until every other rank has disconnected (at most `linger`),
// so rank 0 finishing first does not pull the store from under the others.
class HostingStore final : public Store {
 public:
  HostingStore(std::unique_ptr<TcpStoreServer> server, std::shared_ptr<TcpStoreClient> client, Timeout linger)
      : server_(std::move(server)), client_(std::move(client)), linger_(linger) {}
  ~HostingStore() override {
    client_.reset();  // closes rank 0's own connections
    const auto deadline = std::chrono::steady_clock::now() + linger_;
    while (server_->open_connections() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (server_->open_connections() > 0) {
      TLOG(WARN, "rank 0: closing the job store {} with {} client(s) still connected after {} ms",
           server_->Address(), server_->open_connections(), linger_.count());
    }
    server_->Stop();
  }
  Status Set(const std::string& key, const Bytes& value) override { return client_->Set(key, value); }
  StatusOr<Bytes> Get(const std::string& key, Timeout timeout) override { return client_->Get(key, timeout); }
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override { return client_->Add(key, delta); }
  Status Wait(const std::vector<std::string>& keys, Timeout timeout) override { return client_->Wait(keys, timeout); }
  Status Delete(const std::string& key) override { return client_->Delete(key); }
  std::string Address() const override { return client_->Address(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> client_;
  Timeout linger_;
};

}  // namespace

std::string_view JobEnvSourceName(JobEnvSource source) {
  switch (source) {
    case JobEnvSource::kSingleProcess: return "single process";
    case JobEnvSource::kTorchrun: return "tessera launch/torchrun";
    case JobEnvSource::kOpenMpi: return "Open MPI";
    case JobEnvSource::kSlurm: return "Slurm";
  }
  return "?";
}

std::string JobEnv::Describe() const {
  auto part = [](int v) { return v < 0 ? std::string("?") : std::to_string(v); };
  return fmt::format("rank {}/{} (local {}/{}, node {}/{}) via {}, store {}:{}{}, token from {} (fingerprint {})",
                     rank, world_size, part(local_rank), part(local_world_size), part(node_rank), part(num_nodes),
                     JobEnvSourceName(source), master_addr, master_port,
                     store_hosted ? " (hosted by the launcher)" : (world_size > 1 ? " (hosted by rank 0)" : ""),
                     token_source, TokenFingerprint(token));
}

EnvMap ProcessEnv() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

StatusOr<JobEnv> ParseJobEnv(const EnvMap& map) {
  const Env env(map);
  JobEnv job;
  std::string job_id;
  Status st;
  if (env.Has("RANK") || env.Has("WORLD_SIZE")) {
    st = ParseTorchrun(env, job);
  } else if (env.Has("OMPI_COMM_WORLD_RANK") || env.Has("OMPI_COMM_WORLD_SIZE")) {
    st = ParseOpenMpi(env, job, &job_id);
  } else if (env.Has("SLURM_PROCID") && env.FirstSet({"SLURM_STEP_NUM_TASKS", "SLURM_STEP_ID", "SLURM_STEPID"})) {
    st = ParseSlurm(env, job, &job_id);
  }
  if (st.ok()) st = ResolveMaster(env, job, job_id);
  if (st.ok()) st = ResolveToken(env, job, job_id);
  if (st.ok()) {
    const std::string v = env.Get("TESSERA_STORE_HOSTED").value_or("0");
    if (v != "0" && v != "1") return InvalidArgument("TESSERA_STORE_HOSTED='{}' must be 0 or 1", v);
    job.store_hosted = v == "1";
  }
  if (st.ok() && env.Has("TESSERA_RESTART_COUNT")) {
    auto n = env.Int("TESSERA_RESTART_COUNT", 0, 1 << 30);
    if (n.ok()) {
      job.restart_count = *n;
    } else {
      st = n.status();
    }
  }
  if (!st.ok()) {
    return std::move(st).WithContext(
        fmt::format("while reading the job description from the environment ({} convention)",
                    JobEnvSourceName(job.source)));
  }
  return job;
}

StatusOr<JobEnv> ReadJobEnv() {
  TESSERA_RETURN_IF_ERROR(AwaitSpareAssignment());
  return ParseJobEnv(ProcessEnv());
}

namespace {

// The job's store as seen by one attempt of a restarted job (see header).
std::shared_ptr<Store> ForAttempt(std::shared_ptr<Store> store, const JobEnv& job) {
  if (job.restart_count <= 0) return store;
  return std::shared_ptr<Store>(MakePrefixStore(std::move(store), fmt::format("attempt{}/", job.restart_count)));
}

}  // namespace

StatusOr<std::shared_ptr<Store>> ConnectJobStore(const JobEnv& job, Timeout timeout) {
  if (job.world_size == 1 && !job.store_hosted) return MakeInMemoryStore();
  TcpStoreClientOptions options;
  options.connect_timeout = timeout;
  options.op_timeout = timeout;
  options.client_info = fmt::format("rank {}/{} pid {} on {}", job.rank, job.world_size, ::getpid(), LocalHostName());
  std::unique_ptr<TcpStoreServer> server;
  std::string host = job.master_addr;
  std::vector<int> ports = job.master_port_candidates;
  if (ports.empty()) ports = {job.master_port};
  if (job.rank == 0 && !job.store_hosted) {
    server = std::make_unique<TcpStoreServer>(job.token);
    std::string failures;
    for (int candidate : ports) {
      auto port = server->Start("", candidate);
      if (port.ok()) break;
      failures += fmt::format("{}port {}: {}", failures.empty() ? "" : "; ", candidate, port.status().message());
    }
    if (server->port() <= 0) {
      if (ports.size() == 1) {
        return Unavailable("rank 0 could not host the job store: {} (another job may use MASTER_PORT={}; choose a "
                           "free port)",
                           failures, ports[0]);
      }
      return Unavailable("rank 0 could not host the job store on any port derived from the job id: {} (set "
                         "MASTER_PORT to a free port)",
                         failures);
    }
    host = "127.0.0.1";  // listening on every interface, including loopback
    ports = {server->port()};
  }
  StatusOr<std::shared_ptr<TcpStoreClient>> client = Unavailable("no store port to try");
  if (ports.size() == 1) {
    client = TcpStoreClient::Connect(host, ports[0], job.token, options);
  } else {
    // Rank 0 hosts on one of the candidates; sweep them with short attempts
    // until one authenticates or the timeout passes. A port held by another
    // job's store refuses our token (FailedPrecondition): skip it.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    TcpStoreClientOptions quick = options;
    quick.connect_timeout = Timeout(500);
    std::string last;
    while (!client.ok()) {
      for (int candidate : ports) {
        client = TcpStoreClient::Connect(host, candidate, job.token, quick);
        if (client.ok()) break;
        last = fmt::format("port {}: {}", candidate, client.status().message());
      }
      if (client.ok() || std::chrono::steady_clock::now() >= deadline) break;
    }
    if (!client.ok()) {
      client = Unavailable("no store answered with this job's token on {} at any of the ports derived from the "
                           "job id within {} ms; last: {}",
                           host, timeout.count(), last);
    }
  }
  if (!client.ok()) return client.status().WithContext(fmt::format("while connecting {} to the job store",
                                                                    job.Describe()));
  TLOG(INFO, "{}: connected to the job store", job.Describe());
  if (server) {
    return ForAttempt(std::make_shared<HostingStore>(std::move(server), *client, timeout), job);
  }
  return ForAttempt(*client, job);
}

StatusOr<std::string> FirstHostOfHostlist(std::string_view hostlist) {
  // The first element at bracket depth 0.
  int depth = 0;
  size_t end = 0;
  for (; end < hostlist.size(); ++end) {
    char c = hostlist[end];
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return InvalidArgument("unbalanced ']' in hostlist");
    if (c == ',' && depth == 0) break;
  }
  if (depth != 0) return InvalidArgument("unbalanced '[' in hostlist");
  std::string_view first = hostlist.substr(0, end);
  if (first.empty()) return InvalidArgument("empty hostlist");
  // Replace each "[a-b,c]" by its first number, keeping zero padding.
  std::string host;
  size_t i = 0;
  while (i < first.size()) {
    if (first[i] != '[') {
      host += first[i++];
      continue;
    }
    size_t close = first.find(']', i);
    std::string_view range = first.substr(i + 1, close - i - 1);
    size_t stop = range.find_first_of(",-");
    std::string_view lo = range.substr(0, stop);
    if (lo.empty()) return InvalidArgument("empty range in hostlist");
    for (char c : lo) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return InvalidArgument("non-numeric range '{}'", range);
    }
    host += lo;
    i = close + 1;
  }
  return host;
}

StatusOr<int> TasksOnNode(std::string_view tasks_per_node, int node_id) {
  // Entries "N" or "N(xK)", comma-separated.
  int node = 0;
  size_t pos = 0;
  while (pos <= tasks_per_node.size()) {
    size_t comma = tasks_per_node.find(',', pos);
    std::string_view entry = tasks_per_node.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
    int tasks = 0, repeat = 1;
    auto [p, ec] = std::from_chars(entry.data(), entry.data() + entry.size(), tasks);
    if (ec != std::errc() || tasks < 1) return InvalidArgument("malformed entry '{}'", entry);
    std::string_view rest(p, entry.data() + entry.size() - p);
    if (!rest.empty()) {
      if (rest.size() < 4 || rest.substr(0, 2) != "(x" || rest.back() != ')') {
        return InvalidArgument("malformed entry '{}'", entry);
      }
      auto [q, ec2] = std::from_chars(rest.data() + 2, rest.data() + rest.size() - 1, repeat);
      if (ec2 != std::errc() || q != rest.data() + rest.size() - 1 || repeat < 1) {
        return InvalidArgument("malformed entry '{}'", entry);
      }
    }
    if (node_id < node + repeat) return tasks;
    node += repeat;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return InvalidArgument("lists only {} nodes", node);
}

}  // namespace tessera::comm

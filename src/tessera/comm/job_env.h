// The job description a rank reads from its environment, and the connection
// to the job's rendezvous store.
//
// Conventions, first match wins (so `tessera launch` inside an mpirun or
// Slurm allocation, or mpirun inside Slurm, sees the innermost launcher):
//   1. torchrun / `tessera launch`: RANK, WORLD_SIZE (both or neither),
//      LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; node from
//      TESSERA_NODE_RANK/TESSERA_NUM_NODES or torchrun's GROUP_RANK.
//   2. Open MPI: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE,
//      OMPI_MCA_orte_num_nodes.
//   3. Slurm, inside an srun step (SLURM_STEP_NUM_TASKS or SLURM_STEP_ID
//      set; a batch script's own SLURM_* variables describe the allocation,
//      not a rank, and are ignored): SLURM_PROCID, SLURM_STEP_NUM_TASKS /
//      SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE /
//      SLURM_TASKS_PER_NODE ("2(x3),1" indexed by SLURM_NODEID) /
//      SLURM_NTASKS_PER_NODE, SLURM_NODEID, SLURM_STEP_NUM_NODES.
//   4. none of these: a single process (rank 0 of 1).
// Store address: TESSERA_STORE_ADDR/TESSERA_STORE_PORT (set by `tessera
// launch`, whose MASTER_ADDR/MASTER_PORT are left to PyTorch's own TCPStore,
// as under torchrun) win, then MASTER_ADDR/MASTER_PORT. Otherwise: 127.0.0.1
// when every rank is on this host; under Slurm the first host of
// SLURM_STEP_NODELIST (where task 0 runs), else SLURM_LAUNCH_NODE_IPADDR;
// otherwise an error asking for MASTER_ADDR. Port default 29500, offset by
// a hash of the Slurm/Open MPI job id (29500..39499) when there is one.
// Job token: TESSERA_JOB_TOKEN. Without it: a single process generates one;
// under Open MPI it is derived from OMPI_MCA_orte_precondition_transports
// (a 128-bit random per-job key mpirun hands every rank, as private as the
// environment); otherwise (torchrun-style or Slurm, several ranks) it is an
// error that says how to set one. TESSERA_STORE_HOSTED=1 (set by `tessera
// launch`) means a launcher hosts the store: every rank only connects.
// TESSERA_RESTART_COUNT=n (set by `tessera launch` from its agent;
// launcher_agent.h) is the attempt: from n >= 1 on, ConnectJobStore prefixes
// every key with "attempt<n>/" so keys left by an earlier attempt never
// match a fresh rendezvous.
// Thread-safe (pure functions over an environment snapshot), except
// ReadJobEnv in a warm spare (TESSERA_SPARE=1), which first waits for the
// agent to assign a rank and applies it with setenv (heartbeat.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"

namespace tessera::comm {

inline constexpr int kDefaultMasterPort = 29500;
// Ports derived from a job id lie in [29500, 29500 + kDerivedPortRange).
inline constexpr int kDerivedPortRange = 3000;
inline constexpr int kDerivedPortCandidates = 8;

enum class JobEnvSource { kSingleProcess, kTorchrun, kOpenMpi, kSlurm };
std::string_view JobEnvSourceName(JobEnvSource source);

struct JobEnv {
  JobEnvSource source = JobEnvSource::kSingleProcess;
  int rank = 0;
  int world_size = 1;
  // -1 when the launcher did not say (torchrun-style without LOCAL_*):
  // comm then finds same-host peers from host names exchanged in the store.
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = -1;  // -1: unknown
  int num_nodes = -1;
  std::string master_addr = "127.0.0.1";
  int master_port = kDefaultMasterPort;
  // Ports rank 0 may host the store on when none was given (MASTER_PORT
  // unset, port derived from the launcher's job id): the first one it can
  // bind. The other ranks try each until one answers with this job's token.
  // Empty when the port was given: master_port only.
  std::vector<int> master_port_candidates;
  std::string token;
  std::string token_source;  // "TESSERA_JOB_TOKEN", "generated", ...
  bool store_hosted = false;
  int restart_count = 0;  // TESSERA_RESTART_COUNT: 0 on the first attempt

  // One line for logs: "rank 3/8 (local 1/4, node 1/2) via tessera launch/torchrun, store 10.0.0.1:29500
  // (hosted by the launcher), token from TESSERA_JOB_TOKEN (fingerprint 1a2b3c4d)".
  std::string Describe() const;
};

using EnvMap = std::map<std::string, std::string>;

// A snapshot of this process's environment.
EnvMap ProcessEnv();
// Reads the job from `env`; errors name the variables involved.
StatusOr<JobEnv> ParseJobEnv(const EnvMap& env);
// ParseJobEnv(ProcessEnv()), after AwaitSpareAssignment (heartbeat.h).
StatusOr<JobEnv> ReadJobEnv();

// Connects to the job's store. Unless store_hosted, rank 0 first starts a
// TcpStoreServer on every interface at the first free port of
// master_port_candidates (a derived port can be taken by an unrelated
// socket); the other ranks find it by trying each. The returned Store owns
// it, and destroying it waits (at most `timeout`) until every other rank has
// closed its connection, so rank 0 may finish first. Every rank connects as
// an authenticated client, retrying until `timeout` (also the per-call
// timeout of Set/Add/Delete). One process: an in-memory store. With
// restart_count > 0 the returned store prefixes keys with "attempt<n>/".
StatusOr<std::shared_ptr<Store>> ConnectJobStore(const JobEnv& job, Timeout timeout);

// The first host name of a Slurm hostlist ("node[03-05,9],gpu1" -> "node03").
StatusOr<std::string> FirstHostOfHostlist(std::string_view hostlist);
// The entry of a Slurm tasks-per-node list ("2(x3),1") for node `node_id`.
StatusOr<int> TasksOnNode(std::string_view tasks_per_node, int node_id);

}  // namespace tessera::comm

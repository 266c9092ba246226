// Communicator::FromEnvironment: the world communicator of a launched job.
#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/heartbeat.h"
#include "tessera/comm/job_env.h"

namespace tessera::comm {

StatusOr<std::unique_ptr<Communicator>> Communicator::FromEnvironment(CommOptions options) {
  StatusOr<JobEnv> job = ReadJobEnv();  // a warm spare waits here for its rank
  if (!job.ok()) return job.status();
  StartHeartbeatFromEnvironment();  // under `tessera launch`'s agent only
  base::SetLogRank(job->rank);
  const Timeout timeout = options.timeout.count() > 0 ? options.timeout : Timeout(300000);
  StatusOr<std::shared_ptr<Store>> store = ConnectJobStore(*job, timeout);
  if (!store.ok()) return store.status().WithContext(fmt::format("joining the job as {}", job->Describe()));
  TLOG(INFO, "job: {}", job->Describe());
  return Create(*store, job->rank, job->world_size, options);
}

}  // namespace tessera::comm

// `tessera ccl-perf OP -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP [-d dtype]
// [-o op] [-r root] [-c 0|1] [-z 0|1] [-a 0..3]`: nccl-tests-style sweep of one
// collective (allreduce, allgather, reducescatter, alltoall, broadcast,
// reduce, sendrecv), printing nccl-tests' columns, busbw formulas and the
// final "# Avg bus bandwidth" line. Ranks come from the environment (run it
// under `tessera launch --nproc N`, mpirun or srun) or, with --threads N,
// are N threads of this process. Exits non-zero when a result is wrong.
// --compress int8|fp8|bf16|fp16|topk:F (allreduce, reducescatter) times the
// compressed collective instead (comm/compress/compressed_perf.h).
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tessera/comm/api/ccl_perf.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/comm/compress/compressed_perf.h"

namespace tessera::cli {
namespace {

struct CclPerfArgs {
  std::string op;
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  double factor = 2;
  std::string step = "0";
  int iters = 20;
  int warmup = 5;
  std::string dtype = "float";
  std::string redop = "sum";
  int root = 0;
  int check = 1;
  int blocking = 1;
  int average = 1;
  int registered = 0;
  int threads = 0;
  std::string algo;
  std::string transport = "auto";
  int timeout_ms = 0;
  std::string compress = "none";
};

Status RunRank(comm::Communicator& c, const comm::PerfOptions& o, const comm::compress::CompressionSpec& spec) {
  if (spec.enabled()) {
    auto rows = comm::compress::RunCompressedPerf(c, o, spec, c.rank() == 0 ? stdout : nullptr);
    if (!rows.ok()) return rows.status();
    return c.Barrier();
  }
  StatusOr<comm::PerfResult> r = comm::RunPerf(c, o, c.rank() == 0 ? stdout : nullptr);
  if (!r.ok()) return r.status();
  Status st = c.Barrier();  // rank 0 hosts the store: leave together
  if (!st.ok()) return st;
  if (r->wrong > 0) return DataLoss("{} wrong value(s) in the results", r->wrong);
  return Status::Ok();
}

Status Run(const CclPerfArgs& a) {
  comm::PerfOptions o;
  TESSERA_ASSIGN_OR_RETURN(o.op, comm::ParsePerfOp(a.op));
  TESSERA_ASSIGN_OR_RETURN(o.min_bytes, comm::ParseByteSize(a.min_bytes));
  TESSERA_ASSIGN_OR_RETURN(o.max_bytes, comm::ParseByteSize(a.max_bytes));
  TESSERA_ASSIGN_OR_RETURN(o.step, comm::ParseByteSize(a.step));
  TESSERA_ASSIGN_OR_RETURN(o.dtype, comm::ParseDataType(a.dtype));
  TESSERA_ASSIGN_OR_RETURN(o.redop, comm::ParseReduceOp(a.redop));
  o.factor = a.factor;
  o.iters = a.iters;
  o.warmup = a.warmup;
  o.root = a.root;
  o.check = a.check != 0;
  o.blocking = a.blocking != 0;
  o.average = a.average;
  o.shared_buffers = a.registered != 0;
  TESSERA_ASSIGN_OR_RETURN(comm::compress::CompressionSpec spec, comm::compress::ParseCompressionSpec(a.compress));
  if (spec.enabled()) {
    // Validate before any communicator exists (one message, not one per rank).
    if (o.op != comm::PerfOp::kAllReduce && o.op != comm::PerfOp::kReduceScatter) {
      return InvalidArgument("--compress works with allreduce and reducescatter, not {}", a.op);
    }
    if (o.dtype != comm::DataType::kFloat32) return InvalidArgument("--compress needs -d float");
  }
  comm::CommOptions co;
  co.algo = a.algo;
  TESSERA_ASSIGN_OR_RETURN(co.transport, comm::transport::ParseTransportKind(a.transport));
  if (a.timeout_ms > 0) co.timeout = std::chrono::milliseconds(a.timeout_ms);

  if (a.threads <= 0) {
    TESSERA_ASSIGN_OR_RETURN(auto c, comm::Communicator::FromEnvironment(co));
    return RunRank(*c, o, spec);
  }
  auto store = comm::MakeInMemoryStore();
  std::vector<Status> results(a.threads);
  std::vector<std::thread> ranks;
  for (int r = 0; r < a.threads; ++r) {
    ranks.emplace_back([&, r] {
      StatusOr<std::unique_ptr<comm::Communicator>> c = comm::Communicator::Create(store, r, a.threads, co);
      results[r] = c.ok() ? RunRank(**c, o, spec) : c.status();
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < a.threads; ++r) {
    if (!results[r].ok()) return results[r].WithContext(fmt::format("thread rank {}", r));
  }
  return Status::Ok();
}

}  // namespace

void RegisterCclPerfCommand(CLI::App& app) {
  auto args = std::make_shared<CclPerfArgs>();
  CLI::App* sub = app.add_subcommand("ccl-perf", "nccl-tests-style collective benchmark (run under `tessera launch`)");
  sub->add_option("op", args->op, "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv")
      ->required();
  sub->add_option("-b,--minbytes", args->min_bytes, "smallest size (bytes; K/M/G suffixes)");
  sub->add_option("-e,--maxbytes", args->max_bytes, "largest size");
  sub->add_option("-f,--stepfactor", args->factor, "multiply the size by this between rows");
  sub->add_option("-i,--stepbytes", args->step, "add this to the size between rows (instead of -f)");
  sub->add_option("-n,--iters", args->iters, "timed iterations per size");
  sub->add_option("-w,--warmup_iters", args->warmup, "untimed iterations per size");
  sub->add_option("-d,--datatype", args->dtype, "float, double, bfloat16, half, int8, uint8, int32, int64");
  sub->add_option("-o,--op", args->redop, "sum, prod, min, max, avg");
  sub->add_option("-r,--root", args->root, "root of broadcast and reduce");
  sub->add_option("-c,--check", args->check, "check results (0/1)");
  sub->add_option("-z,--blocking", args->blocking,
                  "1 (default): each iteration is a blocking call, run on the calling thread; 0: queue all "
                  "iterations asynchronously on the progress thread, then wait (nccl-tests' default)");
  sub->add_option("-a,--average", args->average, "time over ranks: 0 rank 0, 1 mean, 2 min, 3 max");
  sub->add_option("-R,--local_register", args->registered,
                  "1: allocate the buffers with AllocShared (shared memory peers map: zero-copy collectives); "
                  "0 (default): private memory");
  sub->add_option("--threads", args->threads, "run N ranks as threads of this process (no launcher)");
  sub->add_option("--algo", args->algo, "force algorithms (like TESSERA_ALGO)");
  sub->add_option("--transport", args->transport, "auto, shm, tcp");
  sub->add_option("--timeout-ms", args->timeout_ms, "per-operation timeout");
  sub->add_option("--compress", args->compress,
                  "time the compressed collective (allreduce, reducescatter): int8, fp8, bf16, fp16, topk:F "
                  "(docs/comm.md, Compressed collectives)");
  sub->callback([args] { ExitWith(Run(*args)); });
}
TESSERA_CLI_COMMAND(50, RegisterCclPerfCommand);

}  // namespace tessera::cli

// Internals of the NCCL-compatible C API (include/tessera/nccl.h).
//
// ncclComm: a tessera::comm::Communicator plus what NCCL adds (the
// rendezvous it keeps alive, PreMulSum operators, non-blocking init state).
// tesseraStream: an ordered list of pending Works. Group state is per
// thread (group.cc). Every entry point reports a failure through Fail(),
// which records a thread-local message for ncclGetLastError and maps the
// Tessera Status to an ncclResult_t. Thread-safe as the header says.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"
#include "tessera/nccl.h"

namespace tessera::nccl {

// errors.cc
ncclResult_t ToResult(const Status& status);
// Records `status` as this thread's last error and returns its result.
ncclResult_t Fail(const Status& status);
ncclResult_t Fail(ncclResult_t result, std::string message);
// Applies NCCL_* environment aliases once (also run at load time).
void ApplyEnvAliases();
// Bound of every wait on a stream or a non-blocking init (2x the
// operation timeout TESSERA_COMM_TIMEOUT_MS, at least 10 s).
std::chrono::milliseconds WaitBound();

// One PreMulSum operator (ncclRedOpCreatePreMulSum).
struct PreMulSum {
  ncclDataType_t dtype;
  bool immediate;
  double value;           // immediate: the scalar as double
  int64_t ivalue;         // immediate integer types: the scalar exactly
  const void* pointer;    // ncclScalarDevice: read when an operation runs
};

// A rendezvous server this process hosts (ncclGetUniqueId); shared by
// every communicator made from its id here.
struct Rendezvous;

}  // namespace tessera::nccl

struct ncclComm {
  std::unique_ptr<tessera::comm::Communicator> comm;  // null while initializing
  std::shared_ptr<void> keep_alive;                   // the hosted store server, if any
  std::shared_ptr<tessera::comm::Store> store;        // the rendezvous store
  int rank = 0;
  int nranks = 0;
  int device = 0;
  bool blocking = true;
  // Non-blocking init: ready turns true when `init` ends (init_status then final).
  std::atomic<bool> ready{true};
  std::mutex init_mu;
  std::condition_variable init_cv;
  tessera::Status init_status;
  std::thread init_thread;
  // PreMulSum operators by id (>= ncclNumOps).
  std::mutex ops_mu;
  std::map<int, tessera::nccl::PreMulSum> premulsum;
  int next_op = ncclNumOps;

  // Waits for a non-blocking init; the communicator or the init error.
  tessera::StatusOr<tessera::comm::Communicator*> Get();
};

struct tesseraStream {
  struct Entry {
    tessera::comm::Work work;
    ncclComm* comm;
    std::shared_ptr<void> keep;  // temporaries the op reads (PreMulSum)
  };
  std::mutex mu;
  std::vector<Entry> pending;
  tessera::Status error;  // first error seen, reported by Synchronize

  // Adds `work`; when the stream's pending work is on another
  // communicator, waits for it first (streams are ordered).
  tessera::Status Enqueue(tessera::comm::Work work, ncclComm* comm, std::shared_ptr<void> keep);
  tessera::Status Synchronize();
};

namespace tessera::nccl {

// One operation: its arguments, where it goes, and the temporaries it
// reads (kept until it completes).
struct PendingOp {
  ncclComm* comm = nullptr;
  tesseraStream* stream = nullptr;
  comm::CollectiveArgs args;
  std::shared_ptr<void> keep;
};

// group.cc: whether this thread is inside ncclGroupStart/End, and adding
// an op (or an init) to the group.
bool InGroup();
void GroupAdd(PendingOp op);
void GroupAddInit(std::function<Status()> init);
// Issues `op` now: blocking for a null stream, else enqueued.
ncclResult_t IssueNow(PendingOp op);

}  // namespace tessera::nccl

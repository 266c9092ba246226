// Tessera streams: ordered queues of pending operations (tesseraStream*).
#include "tessera/nccl/internal.h"

using tessera::Status;
using namespace tessera::nccl;

Status tesseraStream::Enqueue(tessera::comm::Work work, ncclComm* comm, std::shared_ptr<void> keep) {
  std::unique_lock<std::mutex> lock(mu);
  // Operations of one communicator run in issue order already; work on
  // another communicator must finish before this one may start.
  bool other = false;
  for (const Entry& e : pending) other |= (e.comm != comm && !e.work.Test());
  if (other) {
    std::vector<Entry> earlier;
    earlier.swap(pending);
    lock.unlock();
    Status first;
    for (Entry& e : earlier) {
      Status st = e.work.Wait(WaitBound());
      if (!st.ok() && first.ok()) first = st;
    }
    lock.lock();
    if (!first.ok() && error.ok()) error = first;
  } else {
    // Drop completed entries (keeping the first error).
    size_t kept = 0;
    for (Entry& e : pending) {
      if (e.work.Test()) {
        Status st = e.work.Wait(std::chrono::milliseconds(0));
        if (!st.ok() && error.ok()) error = st;
      } else {
        pending[kept++] = std::move(e);
      }
    }
    pending.resize(kept);
  }
  pending.push_back(Entry{std::move(work), comm, std::move(keep)});
  return Status();
}

Status tesseraStream::Synchronize() {
  std::vector<Entry> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    all.swap(pending);
  }
  Status first;
  for (Entry& e : all) {
    Status st = e.work.Wait(WaitBound());
    if (!st.ok() && first.ok()) first = st.WithContext("waiting for an operation on a tessera stream");
  }
  std::lock_guard<std::mutex> lock(mu);
  if (first.ok() && !error.ok()) first = error;
  error = Status();
  return first;
}

extern "C" {

ncclResult_t tesseraStreamCreate(tesseraStream_t* stream) {
  if (stream == nullptr) return Fail(ncclInvalidArgument, "tesseraStreamCreate: stream is NULL");
  *stream = new tesseraStream();
  return ncclSuccess;
}

ncclResult_t tesseraStreamSynchronize(tesseraStream_t stream) {
  if (stream == nullptr) return ncclSuccess;  // the null stream has nothing pending
  return Fail(stream->Synchronize());
}

ncclResult_t tesseraStreamQuery(tesseraStream_t stream) {
  if (stream == nullptr) return ncclSuccess;
  std::lock_guard<std::mutex> lock(stream->mu);
  for (const auto& e : stream->pending) {
    if (!e.work.Test()) return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t tesseraStreamDestroy(tesseraStream_t stream) {
  if (stream == nullptr) return ncclSuccess;
  ncclResult_t r = Fail(stream->Synchronize());
  delete stream;
  return r;
}

}  // extern "C"

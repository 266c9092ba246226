// ncclGroupStart/ncclGroupEnd: per-thread collection of operations, issued
// together at the outermost End.
//   1. Communicator inits of the group run concurrently (threads), joined.
//   2. Collectives are issued in call order (every rank issues the same).
//   3. Sends and receives are paired per communicator by step
//      d = (destination - source) mod n: at step d rank r sends to r+d and
//      receives from r-d as one SendRecv, so both ends of a transfer are at
//      the same step and every step runs send and receive concurrently (two
//      ranks exchanging both ways, rings, all-to-all patterns: no deadlock).
//      A send to oneself is copied into the matching receive from oneself.
//   4. End waits for the operations on the NULL stream; the others stay on
//      their streams.
#include <cstring>
#include <fmt/format.h>

#include "tessera/nccl/internal.h"

using tessera::Status;
using tessera::comm::CollectiveArgs;
using tessera::comm::CollectiveKind;
using tessera::comm::Work;
using namespace tessera::nccl;

namespace {

thread_local int t_depth = 0;
thread_local std::vector<PendingOp>* t_ops = nullptr;
thread_local std::vector<std::function<Status()>>* t_inits = nullptr;

struct Issued {
  std::vector<Work> wait;  // NULL-stream operations
  Status first;
  void Note(const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  }
};

void Issue(PendingOp& op, Issued& out, tesseraStream* also = nullptr) {
  Work w = op.comm->comm->SubmitAsync(op.args);
  if (op.stream == nullptr) {
    out.wait.push_back(w);
  } else {
    out.Note(op.stream->Enqueue(w, op.comm, op.keep));
  }
  if (also != nullptr && also != op.stream) out.Note(also->Enqueue(w, op.comm, op.keep));
}

// Step-paired sends and receives of one communicator (see the top).
void IssueP2p(ncclComm* comm, std::vector<PendingOp*>& ops, Issued& out) {
  const int n = comm->nranks, r = comm->rank;
  std::vector<std::vector<PendingOp*>> sends(n), recvs(n);
  for (PendingOp* op : ops) {
    (op->args.kind == CollectiveKind::kSend ? sends : recvs)[op->args.peer].push_back(op);
  }
  // To oneself: copies, matched in order.
  if (sends[r].size() != recvs[r].size()) {
    out.Note(tessera::InvalidArgument("ncclGroupEnd: rank {} has {} sends to itself but {} receives from itself", r,
                                      sends[r].size(), recvs[r].size()));
  }
  for (size_t k = 0; k < std::min(sends[r].size(), recvs[r].size()); ++k) {
    const CollectiveArgs& s = sends[r][k]->args;
    const CollectiveArgs& v = recvs[r][k]->args;
    if (s.count != v.count) {
      out.Note(tessera::InvalidArgument("ncclGroupEnd: rank {} sends {} bytes to itself, receives {}", r, s.count,
                                        v.count));
      continue;
    }
    if (s.count > 0 && s.send != v.recv) std::memmove(v.recv, s.send, s.count);
  }
  for (int d = 1; d < n; ++d) {
    const int to = (r + d) % n, from = (r - d + n) % n;
    auto& s = sends[to];
    auto& v = recvs[from];
    for (size_t k = 0; k < std::max(s.size(), v.size()); ++k) {
      if (k < s.size() && k < v.size()) {
        PendingOp op = *s[k];
        op.args.kind = CollectiveKind::kSendRecv;
        op.args.recv = v[k]->args.recv;
        op.args.recv_count = v[k]->args.count;
        op.args.recv_peer = from;
        Issue(op, out, v[k]->stream);
      } else {
        Issue(k < s.size() ? *s[k] : *v[k], out);
      }
    }
  }
}

}  // namespace

namespace tessera::nccl {

bool InGroup() { return t_depth > 0; }

void GroupAdd(PendingOp op) {
  if (t_ops == nullptr) t_ops = new std::vector<PendingOp>();
  t_ops->push_back(std::move(op));
}

void GroupAddInit(std::function<Status()> init) {
  if (t_inits == nullptr) t_inits = new std::vector<std::function<Status()>>();
  t_inits->push_back(std::move(init));
}

}  // namespace tessera::nccl

extern "C" {

ncclResult_t ncclGroupStart(void) {
  ++t_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (t_depth == 0) return Fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart");
  if (--t_depth > 0) return ncclSuccess;
  std::vector<std::function<Status()>> inits;
  std::vector<PendingOp> ops;
  if (t_inits != nullptr) inits.swap(*t_inits);
  if (t_ops != nullptr) ops.swap(*t_ops);
  Issued out;
  // 1. Inits, concurrently.
  if (!inits.empty()) {
    std::vector<Status> status(inits.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { status[i] = inits[i](); });
    for (auto& t : threads) t.join();
    for (const Status& st : status) out.Note(st);
  }
  // 2. Collectives in call order; 3. point to point per communicator.
  std::vector<ncclComm*> p2p_comms;
  std::map<ncclComm*, std::vector<PendingOp*>> p2p;
  for (PendingOp& op : ops) {
    if (op.comm->comm == nullptr) {
      out.Note(tessera::FailedPrecondition("ncclGroupEnd: an operation's communicator is not initialized"));
      continue;
    }
    const CollectiveKind k = op.args.kind;
    if (k == CollectiveKind::kSend || k == CollectiveKind::kRecv) {
      if (p2p.find(op.comm) == p2p.end()) p2p_comms.push_back(op.comm);
      p2p[op.comm].push_back(&op);
    } else {
      Issue(op, out);
    }
  }
  for (ncclComm* c : p2p_comms) IssueP2p(c, p2p[c], out);
  // 4. The NULL stream completes before End returns.
  for (Work& w : out.wait) out.Note(w.Wait(WaitBound()));
  return Fail(out.first.ok() ? out.first : out.first.WithContext("ncclGroupEnd"));
}

}  // extern "C"

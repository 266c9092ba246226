// Pairwise exchange over point-to-point channels (any transport):
// all-to-all(v) in n-1 steps, step s sending to rank+s while receiving from
// rank-s, so every rank talks to exactly one peer in each direction per step
// (no incast); linear gather/scatter post all transfers to/from the root in
// one batch; and the Send/Recv/SendRecv primitives of the API.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tessera/comm/algo/algorithm.h"

namespace tessera::comm::algo {
namespace {

constexpr uint32_t kTagPairwise = 0x50574953;  // "PWIS"

using transport::P2pOp;

}  // namespace

Status PairwiseAllToAll(const CollectiveArgs& a, AlgoEnv& env) {
  const int n = env.size;
  const int me = env.rank;
  const size_t elem = a.ElementSize();
  const bool v = a.kind == CollectiveKind::kAllToAllV;
  auto send_off = [&](int d) { return (v ? a.send_displs[d] : d * a.count) * elem; };
  auto send_len = [&](int d) { return (v ? a.send_counts[d] : a.count) * elem; };
  auto recv_off = [&](int j) { return (v ? a.recv_displs[j] : j * a.count) * elem; };
  auto recv_len = [&](int j) { return (v ? a.recv_counts[j] : a.count) * elem; };
  const auto* send = static_cast<const uint8_t*>(a.send);
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (a.send == a.recv) {  // in place: send from a copy
    size_t total = 0;
    for (int d = 0; d < n; ++d) total = std::max(total, send_off(d) + send_len(d));
    if (total > 0) {  // (a rank may send nothing and still receive; 0 bytes of scratch are null)
      uint8_t* copy = env.scratch->Get(0, total);
      std::memcpy(copy, send, total);
      send = copy;
    }
  }
  CopyBytes(recv + recv_off(me), send + send_off(me), std::min(send_len(me), recv_len(me)));
  for (int s = 1; s < n; ++s) {
    const int dst = (me + s) % n;
    const int src = (me - s + n) % n;
    P2pOp ops[2] = {P2pOp::Send(dst, kTagPairwise, send + send_off(dst), send_len(dst)),
                    P2pOp::Recv(src, kTagPairwise, recv + recv_off(src), recv_len(src))};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  return Status::Ok();
}

Status LinearGather(const CollectiveArgs& a, AlgoEnv& env) {
  const size_t bytes = a.count * a.ElementSize();
  std::vector<P2pOp> ops;
  if (env.rank == a.root) {
    auto* recv = static_cast<uint8_t*>(a.recv);
    CopyBytes(recv + a.root * bytes, a.send, bytes);
    for (int j = 0; j < env.size; ++j) {
      if (j != a.root) ops.push_back(P2pOp::Recv(j, kTagPairwise, recv + j * bytes, bytes));
    }
  } else {
    ops.push_back(P2pOp::Send(a.root, kTagPairwise, a.send, bytes));
  }
  return env.transport->Exchange(ops, *env.ctx);
}

Status LinearScatter(const CollectiveArgs& a, AlgoEnv& env) {
  const size_t bytes = a.count * a.ElementSize();
  std::vector<P2pOp> ops;
  if (env.rank == a.root) {
    const auto* send = static_cast<const uint8_t*>(a.send);
    CopyBytes(a.recv, send + a.root * bytes, bytes);
    for (int j = 0; j < env.size; ++j) {
      if (j != a.root) ops.push_back(P2pOp::Send(j, kTagPairwise, send + j * bytes, bytes));
    }
  } else {
    ops.push_back(P2pOp::Recv(a.root, kTagPairwise, a.recv, bytes));
  }
  return env.transport->Exchange(ops, *env.ctx);
}

Status PointToPoint(const CollectiveArgs& a, AlgoEnv& env) {
  const size_t elem = a.ElementSize();
  std::vector<P2pOp> ops;
  switch (a.kind) {
    case CollectiveKind::kSend:
      ops.push_back(P2pOp::Send(a.peer, a.tag, a.send, a.count * elem));
      break;
    case CollectiveKind::kRecv:
      ops.push_back(P2pOp::Recv(a.peer, a.tag, a.recv, a.count * elem));
      break;
    case CollectiveKind::kSendRecv:
      if (a.peer == env.rank && a.recv_peer == env.rank) {
        CopyBytes(a.recv, a.send, std::min(a.count, a.recv_count) * elem);
        return Status::Ok();
      }
    {
      const void* send = a.send;
      if (a.send == a.recv && a.count > 0) {  // in place: send from a copy
        uint8_t* copy = env.scratch->Get(0, a.count * elem);
        std::memcpy(copy, a.send, a.count * elem);
        send = copy;
      }
      ops.push_back(P2pOp::Send(a.peer, a.tag, send, a.count * elem));
      ops.push_back(P2pOp::Recv(a.recv_peer, a.tag, a.recv, a.recv_count * elem));
      break;
    }
    default:
      return Internal("PointToPoint called for {}", CollectiveName(a.kind));
  }
  return env.transport->Exchange(ops, *env.ctx);
}

}  // namespace tessera::comm::algo

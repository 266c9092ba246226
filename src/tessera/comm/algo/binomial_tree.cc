// Binomial-tree algorithms over point-to-point channels (any transport),
// rooted at the op's root (ranks renumbered relative to it): broadcast
// (ceil(log2 n) rounds; large messages are cut into chunks forwarded down
// the tree one chunk behind, so deeper levels work concurrently), reduce
// (children's contributions reduced in a fixed order, so results are
// deterministic), all-reduce = reduce to rank 0 + broadcast (latency
// optimal for small messages), and a dissemination barrier
// (ceil(log2 n) rounds of zero-byte messages).
#include <cstring>
#include <vector>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::algo {
namespace {

constexpr uint32_t kTagTree = 0x54524545;  // "TREE"
constexpr size_t kPipelineChunk = 256 << 10;

using transport::P2pOp;

struct TreeLinks {
  int parent = -1;  // real rank, -1 at the root
  std::vector<int> children;
};

TreeLinks Links(int rank, int size, int root) {
  TreeLinks t;
  const int vr = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (vr & mask) {
      t.parent = (vr - mask + root) % size;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < size) t.children.push_back((vr + mask + root) % size);
  }
  return t;
}

Status BroadcastBuffer(uint8_t* buf, size_t bytes, int root, AlgoEnv& env) {
  if (env.size == 1 || bytes == 0) return Status::Ok();
  const TreeLinks t = Links(env.rank, env.size, root);
  const size_t chunks = (bytes + kPipelineChunk - 1) / kPipelineChunk;
  auto len = [&](size_t k) { return std::min(kPipelineChunk, bytes - k * kPipelineChunk); };
  std::vector<P2pOp> ops;
  // Iteration k receives chunk k from the parent and forwards chunk k-1
  // (the root sends chunk k at once).
  for (size_t k = 0; k <= chunks; ++k) {
    ops.clear();
    if (t.parent >= 0 && k < chunks) {
      ops.push_back(P2pOp::Recv(t.parent, kTagTree, buf + k * kPipelineChunk, len(k)));
    }
    const bool root = t.parent < 0;
    if (root ? k < chunks : k >= 1) {
      const size_t c = root ? k : k - 1;
      for (int child : t.children) {
        ops.push_back(P2pOp::Send(child, kTagTree, buf + c * kPipelineChunk, len(c)));
      }
    }
    if (!ops.empty()) TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  return Status::Ok();
}

// Reduces every rank's `acc` (holding its contribution) into the root's.
Status ReduceBuffer(uint8_t* acc, size_t count, DataType dtype, ReduceOp op, int root, AlgoEnv& env) {
  if (env.size == 1 || count == 0) return Status::Ok();
  const size_t bytes = count * DataTypeSize(dtype);
  const TreeLinks t = Links(env.rank, env.size, root);
  // Children in increasing distance order (the reverse of Links' order).
  for (auto it = t.children.rbegin(); it != t.children.rend(); ++it) {
    P2pOp o = P2pOp::RecvReduce(*it, kTagTree, acc, bytes, dtype, op);
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange({&o, 1}, *env.ctx));
  }
  if (t.parent >= 0) {
    P2pOp o = P2pOp::Send(t.parent, kTagTree, acc, bytes);
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange({&o, 1}, *env.ctx));
  }
  return Status::Ok();
}

}  // namespace

Status TreeBroadcast(const CollectiveArgs& a, AlgoEnv& env) {
  const size_t bytes = a.count * a.ElementSize();
  auto* buf = static_cast<uint8_t*>(a.recv);
  if (env.rank == a.root) CopyBytes(buf, a.send, bytes);
  return BroadcastBuffer(buf, bytes, a.root, env);
}

Status TreeReduce(const CollectiveArgs& a, AlgoEnv& env) {
  const size_t bytes = a.count * a.ElementSize();
  const bool root = env.rank == a.root;
  uint8_t* acc = root ? static_cast<uint8_t*>(a.recv) : env.scratch->Get(0, bytes);
  CopyBytes(acc, a.send, bytes);
  TESSERA_RETURN_IF_ERROR(ReduceBuffer(acc, a.count, a.dtype, a.op, a.root, env));
  if (root && a.op == ReduceOp::kAvg) DivideBy(acc, a.count, a.dtype, env.size);
  return Status::Ok();
}

Status TreeAllReduce(const CollectiveArgs& a, AlgoEnv& env) {
  auto* buf = static_cast<uint8_t*>(a.recv);
  CopyBytes(buf, a.send, a.count * a.ElementSize());
  TESSERA_RETURN_IF_ERROR(ReduceBuffer(buf, a.count, a.dtype, a.op, 0, env));
  if (env.rank == 0 && a.op == ReduceOp::kAvg) DivideBy(buf, a.count, a.dtype, env.size);
  return BroadcastBuffer(buf, a.count * a.ElementSize(), 0, env);
}

Status TreeBarrier(const CollectiveArgs&, AlgoEnv& env) {
  const int n = env.size;
  for (int k = 1; k < n; k <<= 1) {
    P2pOp ops[2] = {P2pOp::Send((env.rank + k) % n, kTagTree, nullptr, 0),
                    P2pOp::Recv((env.rank - k + n) % n, kTagTree, nullptr, 0)};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  return Status::Ok();
}

}  // namespace tessera::comm::algo

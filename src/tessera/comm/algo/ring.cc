// Ring algorithms over point-to-point channels (any transport): the data is
// cut into n segments that travel around the ring, each step sending one
// segment to the right neighbour while receiving (and reducing) another
// from the left. all-reduce = reduce-scatter (n-1 steps, receives reduce in
// place) + all-gather (n-1 steps): 2(n-1)/n x S bytes per rank, bandwidth
// optimal, 2(n-1) latency terms. Each fully reduced segment is computed by
// one rank and copied to the others, so all ranks hold identical results.
#include <cstring>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::algo {
namespace {

constexpr uint32_t kTagRing = 0x52494e47;  // "RING"

using transport::P2pOp;

int Mod(int x, int n) { return ((x % n) + n) % n; }

}  // namespace

Status RingAllReduce(const CollectiveArgs& a, AlgoEnv& env) {
  const int n = env.size;
  const int r = env.rank;
  const size_t elem = a.ElementSize();
  auto* buf = static_cast<uint8_t*>(a.recv);
  const auto* send = static_cast<const uint8_t*>(a.send);
  if (n == 1 || a.count == 0) {
    CopyBytes(buf, send, a.count * elem);
    return Status::Ok();
  }
  const size_t g = 64 / elem;
  auto seg = [&](int i) { return SplitRange(a.count, n, Mod(i, n), g); };
  const int right = Mod(r + 1, n);
  const int left = Mod(r - 1, n);
  // No up-front copy of send into recv: step 0 sends this rank's raw
  // segment straight from `send`, and each segment's first reception
  // combines `send` with the incoming data into `recv`. The one segment
  // never received in the reduce-scatter arrives in the all-gather.
  for (int s = 0; s < n - 1; ++s) {
    const Range sr = seg(r - s - 1);
    const Range rr = seg(r - s - 2);
    const uint8_t* from = s == 0 ? send : buf;
    P2pOp ops[2] = {P2pOp::Send(right, kTagRing, from + sr.begin * elem, sr.size() * elem),
                    P2pOp::RecvReduce(left, kTagRing, buf + rr.begin * elem, rr.size() * elem, a.dtype, a.op,
                                      send + rr.begin * elem)};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  if (a.op == ReduceOp::kAvg) {
    const Range mine = seg(r);
    DivideBy(buf + mine.begin * elem, mine.size(), a.dtype, n);
  }
  for (int s = 0; s < n - 1; ++s) {
    const Range sr = seg(r - s);
    const Range rr = seg(r - s - 1);
    P2pOp ops[2] = {P2pOp::Send(right, kTagRing, buf + sr.begin * elem, sr.size() * elem),
                    P2pOp::Recv(left, kTagRing, buf + rr.begin * elem, rr.size() * elem)};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  return Status::Ok();
}

Status RingAllGather(const CollectiveArgs& a, AlgoEnv& env) {
  const int n = env.size;
  const int r = env.rank;
  const size_t bytes = a.count * a.ElementSize();
  auto* recv = static_cast<uint8_t*>(a.recv);
  CopyBytes(recv + r * bytes, a.send, bytes);
  if (n == 1 || bytes == 0) return Status::Ok();
  const int right = Mod(r + 1, n);
  const int left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    P2pOp ops[2] = {P2pOp::Send(right, kTagRing, recv + Mod(r - s, n) * bytes, bytes),
                    P2pOp::Recv(left, kTagRing, recv + Mod(r - s - 1, n) * bytes, bytes)};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  return Status::Ok();
}

Status RingReduceScatter(const CollectiveArgs& a, AlgoEnv& env) {
  const int n = env.size;
  const int r = env.rank;
  const size_t elem = a.ElementSize();
  const size_t bytes = a.count * elem;
  auto* recv = static_cast<uint8_t*>(a.recv);
  if (bytes == 0) return Status::Ok();
  if (n == 1) {
    CopyBytes(recv, a.send, bytes);
    return Status::Ok();
  }
  uint8_t* work = env.scratch->Get(0, n * bytes);
  std::memcpy(work, a.send, n * bytes);
  const int right = Mod(r + 1, n);
  const int left = Mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    P2pOp ops[2] = {P2pOp::Send(right, kTagRing, work + Mod(r - s - 1, n) * bytes, bytes),
                    P2pOp::RecvReduce(left, kTagRing, work + Mod(r - s - 2, n) * bytes, bytes, a.dtype, a.op)};
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, *env.ctx));
  }
  if (a.op == ReduceOp::kAvg) DivideBy(work + r * bytes, a.count, a.dtype, n);
  std::memcpy(recv, work + r * bytes, bytes);
  return Status::Ok();
}

}  // namespace tessera::comm::algo

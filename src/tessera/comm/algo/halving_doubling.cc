// Recursive halving-doubling all-reduce (Rabenseifner; Gloo's
// allreduce_halving_doubling, HCCL's RHD): reduce-scatter by recursive
// halving (log2 p steps, each exchanging half of the remaining range with
// the partner rank ^ mask), then all-gather by recursive doubling in
// reverse: 2 log2 p latency terms and 2(p-1)/p x S bytes. A non-power-of-two
// size n = p + rem first folds pairs (even rank of the first 2*rem sends
// everything to its odd neighbour, which joins the power-of-two group) and
// finally sends the result back. Each fully reduced range is computed by
// one rank only, so all ranks end with identical bits.
#include <vector>

#include "tessera/comm/algo/algorithm.h"
#include "tessera/comm/algo/reduce_kernels.h"

namespace tessera::comm::algo {
namespace {

constexpr uint32_t kTagRhd = 0x52484400;  // "RHD"

using transport::P2pOp;

}  // namespace

Status HalvingDoublingAllReduce(const CollectiveArgs& a, AlgoEnv& env) {
  const int n = env.size;
  const int r = env.rank;
  const size_t elem = a.ElementSize();
  const size_t bytes = a.count * elem;
  auto* buf = static_cast<uint8_t*>(a.recv);
  CopyBytes(buf, a.send, bytes);
  if (n == 1 || a.count == 0) return Status::Ok();
  const size_t g = 64 / elem;
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;
  const auto& ctx = *env.ctx;

  int newrank;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      P2pOp op = P2pOp::Send(r + 1, kTagRhd, buf, bytes);
      TESSERA_RETURN_IF_ERROR(env.transport->Exchange({&op, 1}, ctx));
      newrank = -1;
    } else {
      P2pOp op = P2pOp::RecvReduce(r - 1, kTagRhd, buf, bytes, a.dtype, a.op);
      TESSERA_RETURN_IF_ERROR(env.transport->Exchange({&op, 1}, ctx));
      newrank = r / 2;
    }
  } else {
    newrank = r - rem;
  }

  if (newrank >= 0) {
    auto real = [&](int nr) { return nr < rem ? nr * 2 + 1 : nr + rem; };
    Range cur{0, a.count};
    std::vector<Range> parents;
    for (int mask = p / 2; mask >= 1; mask >>= 1) {
      const int partner = real(newrank ^ mask);
      const size_t mid = cur.begin + SplitRange(cur.size(), 2, 0, g).end;
      const Range lo{cur.begin, mid};
      const Range hi{mid, cur.end};
      const Range keep = (newrank & mask) ? hi : lo;
      const Range give = (newrank & mask) ? lo : hi;
      P2pOp ops[2] = {P2pOp::Send(partner, kTagRhd, buf + give.begin * elem, give.size() * elem),
                      P2pOp::RecvReduce(partner, kTagRhd, buf + keep.begin * elem, keep.size() * elem, a.dtype,
                                        a.op)};
      TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, ctx));
      parents.push_back(cur);
      cur = keep;
    }
    if (a.op == ReduceOp::kAvg) DivideBy(buf + cur.begin * elem, cur.size(), a.dtype, n);
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = real(newrank ^ mask);
      const Range parent = parents.back();
      parents.pop_back();
      const Range other = cur.begin == parent.begin ? Range{cur.end, parent.end} : Range{parent.begin, cur.begin};
      P2pOp ops[2] = {P2pOp::Send(partner, kTagRhd, buf + cur.begin * elem, cur.size() * elem),
                      P2pOp::Recv(partner, kTagRhd, buf + other.begin * elem, other.size() * elem)};
      TESSERA_RETURN_IF_ERROR(env.transport->Exchange(ops, ctx));
      cur = parent;
    }
  }

  if (r < 2 * rem) {
    P2pOp op = r % 2 == 0 ? P2pOp::Recv(r + 1, kTagRhd, buf, bytes) : P2pOp::Send(r - 1, kTagRhd, buf, bytes);
    TESSERA_RETURN_IF_ERROR(env.transport->Exchange({&op, 1}, ctx));
  }
  return Status::Ok();
}

}  // namespace tessera::comm::algo

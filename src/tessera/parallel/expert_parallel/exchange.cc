#include "tessera/parallel/expert_parallel/exchange.h"

#include <numeric>

#include "tessera/base/error.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

// Plain all-to-all-v of the rows of a contiguous [S, d] tensor.
Tensor AllToAllRows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                    comm::Communicator* ep) {
  const int64_t d = x.size(1);
  const int64_t total = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  Tensor out = Tensor::Empty({total, d}, x.dtype());
  const size_t p = send_rows.size();
  std::vector<size_t> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
  size_t send_at = 0, recv_at = 0;
  for (size_t q = 0; q < p; ++q) {
    send_counts[q] = static_cast<size_t>(send_rows[q] * d);
    send_displs[q] = send_at;
    send_at += send_counts[q];
    recv_counts[q] = static_cast<size_t>(recv_rows[q] * d);
    recv_displs[q] = recv_at;
    recv_at += recv_counts[q];
  }
  Tensor xs = x.Contiguous();
  ThrowIfFailed(ep->AllToAllV(xs.raw_data(), std::move(send_counts), std::move(send_displs), out.raw_data(),
                              std::move(recv_counts), std::move(recv_displs), CommDataType(x.dtype())),
                "ExchangeRows (all_to_allv)");
  return out;
}

}  // namespace

Tensor ExchangeRows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                    comm::Communicator* ep) {
  const size_t p = static_cast<size_t>(GroupSize(ep));
  TESSERA_OP_CHECK(x.defined() && x.dim() == 2 && IsFloating(x.dtype()),
                   "ExchangeRows: x must be a floating [S, d] tensor, got {}",
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(send_rows.size() == p && recv_rows.size() == p,
                   "ExchangeRows: {} send and {} receive counts for {} ranks", send_rows.size(), recv_rows.size(), p);
  const int64_t sent = std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0});
  TESSERA_OP_CHECK(sent == x.size(0), "ExchangeRows: send counts sum to {} but x has {} rows", sent, x.size(0));
  if (IsTrivialGroup(ep)) return x;
  Tensor out = AllToAllRows(x, send_rows, recv_rows, ep);
  // Recorded whenever grad mode is on, even if x needs no gradient: a rank
  // whose input is a constant still has to join the backward exchange.
  if (graph::GradEnabled()) {
    graph::Record("ExchangeRows", {x}, {out},
                  [send_rows, recv_rows, ep](const std::vector<Tensor>& g, const std::vector<bool>&) {
                    return std::vector<Tensor>{AllToAllRows(g[0], recv_rows, send_rows, ep)};
                  });
  }
  return out;
}

std::vector<int64_t> ExchangeCounts(const std::vector<int64_t>& counts, comm::Communicator* ep) {
  const int p = GroupSize(ep);
  TESSERA_OP_CHECK(counts.size() % static_cast<size_t>(p) == 0, "ExchangeCounts: {} counts for {} ranks",
                   counts.size(), p);
  if (IsTrivialGroup(ep)) return counts;
  std::vector<int64_t> out(counts.size());
  ThrowIfFailed(ep->AllToAll(counts.data(), out.data(), counts.size() / p, comm::DataType::kInt64),
                "ExchangeCounts (all_to_all)");
  return out;
}

}  // namespace tessera::parallel

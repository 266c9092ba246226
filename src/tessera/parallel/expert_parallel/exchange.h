// Token exchange of expert parallelism: a differentiable all-to-all-v of
// rows, and the all-to-all of per-expert row counts that precedes it.
//
//   ExchangeRows(x [S, d], send_rows[p], recv_rows[p], ep) -> [R, d]
//     sends rows [Σ_{q<p} send_rows[q], +send_rows[p]) of x to rank p and
//     returns the rows received, ordered by source rank (R = Σ recv_rows).
//     Backward sends the gradient rows back the same way with the counts
//     swapped (the adjoint of a permutation). Recorded on the tape whenever
//     grad mode is on (even with zero rows, or an x that needs no gradient),
//     so every rank of `ep` runs the backward exchange: every rank must
//     backpropagate through the result.
//   ExchangeCounts(counts [ep · k], ep) -> [ep · k]: block q of the result
//     holds block (this rank) of rank q's counts (a plain all-to-all).
// `ep` null or of size 1: ExchangeRows returns x, ExchangeCounts the input.
// A failed communication throws OpError with the communicator's Status.
// Thread-safety: as Communicator and the tape (one thread per rank).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/comm/api/communicator.h"
#include "tessera/tensor/tensor.h"

namespace tessera::parallel {

Tensor ExchangeRows(const Tensor& x, const std::vector<int64_t>& send_rows, const std::vector<int64_t>& recv_rows,
                    comm::Communicator* ep);

std::vector<int64_t> ExchangeCounts(const std::vector<int64_t>& counts, comm::Communicator* ep);

}  // namespace tessera::parallel

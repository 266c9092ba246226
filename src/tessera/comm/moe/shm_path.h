// The fused same-host path of MoE dispatch / combine (comm/moe/buffer.h,
// low_latency.h): when ranks read each other's memory directly
// (Communicator::direct_peer_reads: threads, or cross-memory attach), one
// custom operation (Communicator::RunCustom) publishes each rank's source
// buffer in a low-latency step and every rank pulls exactly the bytes it
// needs straight into their final place — a token row from the source's
// own buffer into its expert row, a partial sum from the expert side's
// staging into the accumulator — then a closing step keeps the sources
// untouched until all ranks are done. One pass per byte instead of
// pack / exchange / unpack. Runs on the communicator's executor thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/types.h"
#include "tessera/comm/moe/layout.h"
#include "tessera/comm/moe/payload.h"

namespace tessera::comm::algo {
struct AlgoEnv;
}

namespace tessera::comm::moe::shm_path {

// Rows of `src` (this rank's tokens, `src_row_bytes` apart: the input
// itself when `exact`, else its rows encoded in `payload`) to every rank's
// expert rows `out` (elements of `dtype`, `hidden` per row).
Status Dispatch(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* src, size_t src_row_bytes, bool exact,
                Payload payload, DataType dtype, int64_t hidden, uint8_t* out, std::vector<uint8_t>& tmp);

// `partials`: this rank's partial sums, one encoded row (`payload`) per
// received token in receive order. Every rank adds, in rank order, the
// rows of its own tokens from every rank into `sum` [T, hidden] (fp32,
// zeroed by the caller).
Status Combine(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* partials, Payload payload,
               int64_t hidden, float* sum, std::vector<uint8_t>& tmp);

// Every rank adds, per token and in expert order, weight · y_r[row] over
// its choices (h.topk_idx / h.remote_rows; `weights` [T·k] or null for 1)
// into `sum` [T, hidden] (fp32, zeroed by the caller), reading the expert
// rows `y` (elements of `dtype`) that every rank published.
Status CombineRows(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* y, DataType dtype,
                   const float* weights, int64_t hidden, float* sum, std::vector<uint8_t>& tmp);

// Low-latency blocks: `blocks` holds one block of `block_bytes` per
// destination (an int64 count at its start, then `count` records of
// `record_bytes` from byte 16). Every rank copies its block from every
// source into `recv` (block s at s · block_bytes), header and records only.
Status PullBlocks(algo::AlgoEnv& env, const uint8_t* blocks, size_t block_bytes, size_t record_bytes, int64_t max_records,
                  uint8_t* recv);

}  // namespace tessera::comm::moe::shm_path

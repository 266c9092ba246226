// The zero-copy same-host path of MoE dispatch / combine (comm/moe/buffer.h,
// low_latency.h), DeepEP's registered-buffer design on shared memory: when
// ranks map each other's shared allocations (Communicator::zero_copy), each
// rank writes what it sends once into its own shared staging (a token row
// once, however many ranks read it; a partial sum once per (token, rank)),
// one custom operation (Communicator::RunCustom / SubmitCustom) publishes
// every staging in a low-latency step, and every rank reads exactly the
// bytes it needs straight from the peers' mappings into their final place
// (an expert row, an accumulator) with plain loads: no system call per row,
// no pack / exchange / unpack. A closing step keeps every staging untouched
// until all ranks are done. Runs on the communicator's executor thread.
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

// Every rank's published shared buffer, mapped here, for the length of one
// custom operation. Open publishes [mine, mine + bytes) (which must lie in
// one AllocShared allocation) in an LL step (a barrier: every buffer is
// filled), maps the peers' (cached by the shm context) and, for ranks that
// are threads of this process, stays registered inside their buffers
// (shm::Context::EnterPeer) until Close or destruction. Close leaves and
// runs the closing LL step.
class PeerViews {
 public:
  explicit PeerViews(algo::AlgoEnv& env) : env_(env) {}
  ~PeerViews() { Leave(); }
  PeerViews(const PeerViews&) = delete;
  PeerViews& operator=(const PeerViews&) = delete;

  Status Open(const void* mine, size_t bytes);
  const uint8_t* at(int rank) const { return base_[rank]; }
  Status Close();

 private:
  void Leave();
  algo::AlgoEnv& env_;
  std::vector<const uint8_t*> base_;
  std::vector<int> entered_;
};

// Rows of every rank's tokens to this rank's expert rows `out` (elements of
// `dtype`, `hidden` per row). `src` (shared): this rank's tokens, token t's
// row at t · src_row_bytes, the input's bytes when `exact`, else encoded in
// `payload`; `src_bytes` its extent.
Status Dispatch(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* src, size_t src_row_bytes, size_t src_bytes,
                bool exact, Payload payload, DataType dtype, int64_t hidden, uint8_t* out);

// `partials` (shared): this rank's partial sums, one encoded row (`payload`)
// per received token in receive order. Every rank sums, in rank order, the
// rows of its own tokens from every rank into `sum` [T, hidden] (fp32;
// StoreOrAccumulate with `stored`, T flags cleared by the caller).
Status Combine(algo::AlgoEnv& env, const DispatchHandle& h, const uint8_t* partials, Payload payload, int64_t hidden,
               std::vector<uint8_t>& stored, float* sum);

}  // namespace tessera::comm::moe::shm_path

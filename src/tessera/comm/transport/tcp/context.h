// The tcp transport of one communicator: every pair of ranks is joined by
// `streams` non-blocking TCP connections (TCP_NODELAY, large buffers).
// Setup goes through the Store: each rank listens on an ephemeral port and
// publishes "tcp/<rank>" = its addresses (TESSERA_SOCKET_IFNAME restricts
// them to one interface; 127.0.0.1 first for peers on the same host), the
// port and a random 128-bit secret; the higher rank of each pair connects
// and presents the listener's secret, so stray or forged connections are
// refused (and logged). Each pair has `streams` data streams plus one
// control stream. The listener stays open: a dropped stream is
// re-established through it (same authentication; pair.h), and peers probe
// it to tell a dropped connection from a dead process. Data path and link
// recovery: pair.h. Waiting: waiter.h (poll, no spinning). Failures: a peer
// that dies or aborts closes its sockets and listener, which fails every
// pending transfer with that peer at once (Unavailable naming the op, rank
// and host); Abort() shuts down the listener and every socket so the peers
// fail promptly too; a silent peer fails at the op deadline.
// Thread-safety: executor thread only, except Abort().
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"
#include "tessera/comm/transport/tcp/pair.h"
#include "tessera/comm/transport/tcp/waiter.h"
#include "tessera/comm/transport/transport.h"

namespace tessera::comm::transport::tcp {

struct Options {
  int streams = 0;                 // per peer; 0 = TESSERA_TCP_STREAMS
  size_t chunk_bytes = 0;          // frame size; 0 = TESSERA_TCP_CHUNK_KB
  int checksum = -1;               // -1: TESSERA_TCP_CHECKSUM (default on), 0 off, 1 on
  std::vector<std::string> hosts;  // host name per rank (messages)
  std::vector<std::string> host_keys;  // same-host identity per rank (address choice)
};

class Context final : public Transport {
 public:
  static StatusOr<std::unique_ptr<Context>> Create(Store& store, int rank, int size, const Options& options,
                                                   Timeout timeout);
  ~Context() override;

  TransportKind kind() const override { return TransportKind::kTcp; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status Exchange(std::span<P2pOp> ops, const OpContext& ctx) override;
  void Abort(std::string_view reason) override;
  std::string PeerDescription(int peer) const override;
  int failed_peer() const override { return failed_peer_; }
  int streams() const { return streams_; }
  bool checksum() const { return checksum_; }

 private:
  Context() = default;
  // Accepts re-established streams and probes on the listener.
  void ServiceListener();

  int rank_ = 0;
  int size_ = 1;
  int streams_ = 1;
  bool checksum_ = true;
  int listen_fd_ = -1;
  uint8_t secret_[16] = {};
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  Waiter waiter_;
  std::atomic<bool> aborted_{false};
  int failed_peer_ = -1;
};

}  // namespace tessera::comm::transport::tcp

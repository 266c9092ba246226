// The TCP rendezvous store: a key-value server hosted by the launcher (or by
// rank 0 when no launcher hosts one) and a Store client for every rank.
//
// TcpStoreServer: one background thread multiplexes every connection with
// poll() over non-blocking sockets. Each connection must authenticate with
// the per-job token (auth.h handshake) within `auth_timeout`; a wrong or
// missing proof is refused, counted and logged (TLOG(WARN) with the peer
// address). Frames above the limit (kMaxHandshakeFrame before auth,
// max_frame_bytes after) close the connection. Get/Wait requests park on the
// server until their keys appear or their timeout passes (a DeadlineExceeded
// reply), so waiting costs no polling traffic. Stop() (and the destructor)
// wakes the thread, closes every connection and joins; it is bounded.
// Start/Stop are not thread-safe with each other; the accessors are.
//
// TcpStoreClient: a Store. Connect() retries with exponential backoff until
// the connect timeout (the server may start later than its clients), then
// authenticates, and verifies the server's proof (so a stale server of
// another job on the same port is detected). Calls from several threads run
// concurrently over a small pool of authenticated connections. Every call is
// bounded: Set/Add/Delete by op_timeout; Get/Wait by their own timeout plus
// op_timeout. If the server goes away the client fails fast from then on
// (Unavailable naming the store address); it does not reconnect.
// Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"
#include "tessera/comm/store_wire.h"

namespace tessera::comm {

struct TcpStoreServerOptions {
  size_t max_frame_bytes = wire::kDefaultMaxFrameBytes;
  Timeout auth_timeout = Timeout(10000);
  int backlog = 4096;
};

class TcpStoreServer {
 public:
  explicit TcpStoreServer(std::string token, TcpStoreServerOptions options = {});
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Binds host:port (host "" = every interface; port 0 = an ephemeral
  // port), starts the thread and returns the bound port.
  StatusOr<int> Start(const std::string& host, int port);
  void Stop();

  int port() const;
  // "tcp://host:port" as bound.
  std::string Address() const;
  // Connections accepted / refused (bad proof, bad frame, no auth in time).
  int64_t accepted_connections() const;
  int64_t refused_connections() const;
  // Authenticated connections open now.
  int64_t open_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct TcpStoreClientOptions {
  Timeout connect_timeout = Timeout(60000);
  Timeout op_timeout = Timeout(60000);
  size_t max_frame_bytes = wire::kDefaultMaxFrameBytes;
  // Shown in the server's log ("rank 3 pid 1234 on host-a"); default: pid
  // and host name.
  std::string client_info;
};

class TcpStoreClient final : public Store {
 public:
  static StatusOr<std::shared_ptr<TcpStoreClient>> Connect(const std::string& host, int port, std::string token,
                                                           TcpStoreClientOptions options = {});
  ~TcpStoreClient() override;

  Status Set(const std::string& key, const Bytes& value) override;
  StatusOr<Bytes> Get(const std::string& key, Timeout timeout) override;
  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  Status Wait(const std::vector<std::string>& keys, Timeout timeout) override;
  Status Delete(const std::string& key) override;
  std::string Address() const override;

  class Impl;
  explicit TcpStoreClient(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::comm

// TcpStoreClient: the Store every rank uses, over a pool of authenticated
// connections to the TcpStoreServer (tcp_store_server.cc).
#include "tessera/comm/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tessera/base/logging.h"
#include "tessera/comm/auth.h"

namespace tessera::comm {

using wire::Clock;
using wire::Deadline;

namespace {

std::string DefaultClientInfo() {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("pid {} on {}", ::getpid(), host);
}

int64_t Ms(Timeout t) { return t.count(); }

}  // namespace

class TcpStoreClient::Impl {
 public:
  Impl(std::string host, int port, std::string token, TcpStoreClientOptions options)
      : host_(std::move(host)),
        port_(port),
        token_(std::move(token)),
        options_(std::move(options)),
        address_("tcp://" + wire::JoinHostPort(host_, port_)) {
    if (options_.client_info.empty()) options_.client_info = DefaultClientInfo();
    options_.client_info = wire::Sanitize(options_.client_info, wire::kMaxClientInfo - 3);
  }

  ~Impl() {
    for (int fd : idle_) ::close(fd);
  }

  // First connection: retries with backoff until the connect timeout.
  Status ConnectFirst() {
    const Deadline deadline = Clock::now() + options_.connect_timeout;
    std::mt19937 rng(std::random_device{}());
    auto backoff = std::chrono::milliseconds(10);
    int attempts = 0;
    Status last;
    for (;;) {
      ++attempts;
      auto fd = OpenConnection(std::min(deadline, Clock::now() + std::chrono::seconds(10)));
      if (fd.ok()) {
        Release(*fd);
        TLOG(DEBUG, "connected to store {} after {} attempt(s)", address_, attempts);
        return Status::Ok();
      }
      last = fd.status();
      // A refusal or a server without our token is definitive.
      if (last.code() == StatusCode::kFailedPrecondition || last.code() == StatusCode::kInvalidArgument) return last;
      const auto now = Clock::now();
      if (now >= deadline) break;
      auto jitter = std::chrono::milliseconds(std::uniform_int_distribution<int>(0, backoff.count() / 2)(rng));
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff + jitter, deadline - now));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
    return Unavailable(
        "could not connect to store {} within {} ms ({} attempts); last error: {}. Is the store server (the "
        "launcher or rank 0) running and reachable at TESSERA_STORE_ADDR:TESSERA_STORE_PORT (else MASTER_ADDR:MASTER_PORT)?",
        address_, Ms(options_.connect_timeout), attempts, last.message());
  }

  // Sends one request and returns the reply payload after its seq and code
  // (OK replies) or the error.
  StatusOr<Bytes> Call(wire::Writer& request_body, uint32_t seq, const std::string& what, Timeout extra_wait) {
    if (request_body.payload_size() > options_.max_frame_bytes) {
      return InvalidArgument("store {}: {}: request of {} bytes exceeds the frame limit of {} bytes", address_, what,
                             request_body.payload_size(), options_.max_frame_bytes);
    }
    const Timeout budget = options_.op_timeout + extra_wait;
    const Deadline deadline = Clock::now() + budget;
    TESSERA_ASSIGN_OR_RETURN(int fd, Acquire(deadline));
    const std::string context = fmt::format("store {}: {}", address_, what);
    Status st = wire::SendAll(fd, request_body.Frame(), deadline, context);
    Bytes reply;
    if (st.ok()) st = wire::RecvFrame(fd, options_.max_frame_bytes + 64, deadline, &reply, context);
    if (!st.ok()) {
      ::close(fd);
      if (st.code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded("store {}: no reply to {} within {} ms (server overloaded or unreachable)", address_,
                                what, Ms(budget));
      }
      if (st.code() == StatusCode::kUnavailable) {
        Status lost = Unavailable(
            "{} (the store server has exited or dropped the connection; if its log shows a refused frame, the "
            "request exceeded its limit)",
            st.message());
        std::lock_guard<std::mutex> lock(mu_);
        if (lost_.ok()) lost_ = lost;
        return lost;
      }
      return st;
    }
    wire::Reader r(reply);
    uint32_t got_seq = 0;
    uint8_t code = 0;
    if (!r.U32(&got_seq) || !r.U8(&code) || got_seq != seq) {
      ::close(fd);
      return DataLoss("store {}: {}: malformed reply (sequence {} expected)", address_, what, seq);
    }
    Bytes rest(reply.begin() + 5, reply.end());
    if (code != 0) {
      std::string message;
      wire::Reader mr(rest);
      if (!mr.Str(&message)) message = "(unreadable error message)";
      Release(fd);
      auto status_code = code <= static_cast<uint8_t>(StatusCode::kInternal) ? static_cast<StatusCode>(code)
                                                                              : StatusCode::kInternal;
      return Status(status_code, fmt::format("store {}: {}", address_, message));
    }
    Release(fd);
    return rest;
  }

  uint32_t NextSeq() { return seq_.fetch_add(1, std::memory_order_relaxed); }
  const std::string& address() const { return address_; }

 private:
  StatusOr<int> Acquire(Deadline deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!lost_.ok()) return lost_;
      if (!idle_.empty()) {
        int fd = idle_.back();
        idle_.pop_back();
        return fd;
      }
    }
    // Another thread holds every connection: open one more (no retries:
    // the server was up when we first connected).
    auto fd = OpenConnection(deadline);
    if (!fd.ok()) {
      return Status(fd.status().code(), fmt::format("store {}: opening another connection: {}", address_,
                                                    fd.status().message()));
    }
    return fd;
  }

  void Release(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(fd);
  }

  StatusOr<int> OpenConnection(Deadline deadline) {
    TESSERA_ASSIGN_OR_RETURN(int fd, wire::ConnectOnce(host_, port_, deadline));
    Status st = Handshake(fd, deadline);
    if (!st.ok()) {
      ::close(fd);
      return st;
    }
    return fd;
  }

  Status Handshake(int fd, Deadline deadline) {
    const std::string what = fmt::format("store {}: handshake", address_);
    Bytes hello;
    TESSERA_RETURN_IF_ERROR(wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &hello, what));
    wire::Reader r(hello);
    uint32_t magic = 0;
    uint8_t version = 0;
    Bytes server_nonce;
    if (!r.U32(&magic) || magic != wire::kMagic || !r.U8(&version) || !r.Blob(&server_nonce) ||
        server_nonce.size() != kNonceBytes) {
      return FailedPrecondition("{}: the service at this address is not a Tessera store", what);
    }
    if (version != wire::kVersion) {
      return FailedPrecondition("{}: server speaks protocol version {}, this client {}", what, version,
                                wire::kVersion);
    }
    TESSERA_ASSIGN_OR_RETURN(Bytes client_nonce, RandomBytes(kNonceBytes));
    wire::Writer auth;
    auth.U32(wire::kMagic)
        .U8(wire::kVersion)
        .Blob(client_nonce)
        .Str(options_.client_info)
        .Blob(ClientProof(token_, server_nonce, client_nonce, options_.client_info));
    TESSERA_RETURN_IF_ERROR(wire::SendAll(fd, auth.Frame(), deadline, what));
    Bytes reply;
    Status st = wire::RecvFrame(fd, wire::kMaxHandshakeFrame, deadline, &reply, what);
    if (st.code() == StatusCode::kUnavailable) {
      return FailedPrecondition("{}: the server closed the connection during authentication ({})", what,
                                st.message());
    }
    TESSERA_RETURN_IF_ERROR(st);
    wire::Reader rr(reply);
    uint8_t verdict = 1;
    if (!rr.U8(&verdict)) return FailedPrecondition("{}: malformed authentication reply", what);
    if (verdict != 0) {
      std::string reason;
      rr.Str(&reason);
      return FailedPrecondition(
          "{}: the server refused this client ({}); this process's job token (fingerprint {}) is not the "
          "server's — check TESSERA_JOB_TOKEN",
          what, wire::Sanitize(reason, 256), TokenFingerprint(token_));
    }
    Bytes server_proof;
    if (!rr.Blob(&server_proof) || !MacEqual(server_proof, ServerProof(token_, server_nonce, client_nonce))) {
      return FailedPrecondition(
          "{}: the server could not prove it knows this job's token: it belongs to another job (a stale store "
          "on this port?)",
          what);
    }
    return Status::Ok();
  }

  std::string host_;
  int port_;
  std::string token_;
  TcpStoreClientOptions options_;
  std::string address_;
  std::atomic<uint32_t> seq_{1};
  std::mutex mu_;
  std::vector<int> idle_;
  Status lost_;
};

StatusOr<std::shared_ptr<TcpStoreClient>> TcpStoreClient::Connect(const std::string& host, int port,
                                                                  std::string token, TcpStoreClientOptions options) {
  TESSERA_RETURN_IF_ERROR(ValidateJobToken(token, "the store client's token"));
  if (port <= 0 || port > 65535) return InvalidArgument("store port {} out of range 1..65535", port);
  if (host.empty()) return InvalidArgument("store host is empty");
  auto impl = std::make_unique<Impl>(host, port, std::move(token), std::move(options));
  TESSERA_RETURN_IF_ERROR(impl->ConnectFirst());
  return std::make_shared<TcpStoreClient>(std::move(impl));
}

TcpStoreClient::TcpStoreClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreClient::~TcpStoreClient() = default;

std::string TcpStoreClient::Address() const { return impl_->address(); }

Status TcpStoreClient::Set(const std::string& key, const Bytes& value) {
  const uint32_t seq = impl_->NextSeq();
  wire::Writer w;
  w.U32(seq).U8(static_cast<uint8_t>(wire::Op::kSet)).Str(key).Blob(value);
  return impl_->Call(w, seq, fmt::format("Set of key '{}'", key), Timeout(0)).status();
}

StatusOr<Bytes> TcpStoreClient::Get(const std::string& key, Timeout timeout) {
  timeout = std::max(timeout, Timeout(0));
  const uint32_t seq = impl_->NextSeq();
  wire::Writer w;
  w.U32(seq).U8(static_cast<uint8_t>(wire::Op::kGet)).Str(key).U64(static_cast<uint64_t>(timeout.count()));
  TESSERA_ASSIGN_OR_RETURN(Bytes rest, impl_->Call(w, seq, fmt::format("Get of key '{}'", key), timeout));
  wire::Reader r(rest);
  Bytes value;
  if (!r.Blob(&value) || !r.AtEnd()) return DataLoss("store {}: malformed reply to Get of key '{}'", Address(), key);
  return value;
}

StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  const uint32_t seq = impl_->NextSeq();
  wire::Writer w;
  w.U32(seq).U8(static_cast<uint8_t>(wire::Op::kAdd)).Str(key).I64(delta);
  TESSERA_ASSIGN_OR_RETURN(Bytes rest, impl_->Call(w, seq, fmt::format("Add on key '{}'", key), Timeout(0)));
  wire::Reader r(rest);
  int64_t value = 0;
  if (!r.I64(&value) || !r.AtEnd()) return DataLoss("store {}: malformed reply to Add on key '{}'", Address(), key);
  return value;
}

Status TcpStoreClient::Wait(const std::vector<std::string>& keys, Timeout timeout) {
  timeout = std::max(timeout, Timeout(0));
  const uint32_t seq = impl_->NextSeq();
  wire::Writer w;
  w.U32(seq).U8(static_cast<uint8_t>(wire::Op::kWait)).U32(static_cast<uint32_t>(keys.size()));
  for (const std::string& k : keys) w.Str(k);
  w.U64(static_cast<uint64_t>(timeout.count()));
  std::string what = keys.size() == 1 ? fmt::format("Wait for key '{}'", keys[0])
                                      : fmt::format("Wait for {} keys ('{}', ...)", keys.size(),
                                                    keys.empty() ? "" : keys[0]);
  return impl_->Call(w, seq, what, timeout).status();
}

Status TcpStoreClient::Delete(const std::string& key) {
  const uint32_t seq = impl_->NextSeq();
  wire::Writer w;
  w.U32(seq).U8(static_cast<uint8_t>(wire::Op::kDelete)).Str(key);
  return impl_->Call(w, seq, fmt::format("Delete of key '{}'", key), Timeout(0)).status();
}

}  // namespace tessera::comm

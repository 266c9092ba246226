#include "tessera/comm/transport/transport.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace tessera::comm::transport {

std::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto: return "auto";
    case TransportKind::kShm: return "shm";
    case TransportKind::kTcp: return "tcp";
  }
  return "?";
}

StatusOr<TransportKind> ParseTransportKind(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t.empty() || t == "auto") return TransportKind::kAuto;
  if (t == "shm") return TransportKind::kShm;
  if (t == "tcp") return TransportKind::kTcp;
  return InvalidArgument("unknown transport '{}' (expected auto, shm, tcp)", text);
}

const std::string& OpContext::Name() const {
  if (name_.empty()) {
    name_ = seq ? fmt::format("{} #{}", label, seq) : std::string(label);
    if (comm != nullptr) name_ += fmt::format(" [{} rank {}/{}]", *comm, rank, size);
  }
  return name_;
}

Status Transport::SendRecv(int send_peer, const void* send_buf, size_t send_bytes, int recv_peer, void* recv_buf,
                           size_t recv_bytes, uint32_t tag, const OpContext& ctx) {
  P2pOp ops[2] = {P2pOp::Send(send_peer, tag, send_buf, send_bytes),
                  P2pOp::Recv(recv_peer, tag, recv_buf, recv_bytes)};
  return Exchange(ops, ctx);
}

}  // namespace tessera::comm::transport

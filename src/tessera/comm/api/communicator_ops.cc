// Communicator operations: argument checks, then submission to the
// executor (async) or inline/blocking execution.
#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "tessera/comm/api/communicator.h"
#include "tessera/comm/api/communicator_impl.h"

namespace tessera::comm {
namespace {

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a_bytes == 0 || b_bytes == 0 || a == nullptr || b == nullptr) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

Status Communicator::Impl::Validate(const CollectiveArgs& a) const {
  if (a.custom) return Status::Ok();  // the operation checks its own arguments
  const std::string_view op = CollectiveName(a.kind);
  const size_t elem = a.ElementSize();
  const size_t n = static_cast<size_t>(size);
  auto need = [&](const void* p, const char* what, bool needed) -> Status {
    if (needed && p == nullptr) return InvalidArgument("{}: {} buffer is null (count {})", op, what, a.count);
    return Status::Ok();
  };
  auto root_ok = [&]() -> Status {
    if (a.root < 0 || a.root >= size) return InvalidArgument("{}: root {} is not a rank of [0, {})", op, a.root, size);
    return Status::Ok();
  };
  // Bytes of send/recv on this rank; in-place pattern allowed (send == recv + offset).
  size_t send_bytes = 0, recv_bytes = 0, inplace_offset = 0;
  bool check_overlap = true;
  const bool nonempty = a.count > 0;
  switch (a.kind) {
    case CollectiveKind::kAllReduce:
      send_bytes = recv_bytes = a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      break;
    case CollectiveKind::kReduce:
      TESSERA_RETURN_IF_ERROR(root_ok());
      send_bytes = a.count * elem;
      recv_bytes = rank == a.root ? a.count * elem : 0;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty && rank == a.root));
      break;
    case CollectiveKind::kBroadcast:
      TESSERA_RETURN_IF_ERROR(root_ok());
      send_bytes = rank == a.root ? a.count * elem : 0;
      recv_bytes = a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty && rank == a.root));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      break;
    case CollectiveKind::kAllGather:
      send_bytes = a.count * elem;
      recv_bytes = a.count * elem * n;
      inplace_offset = rank * a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      break;
    case CollectiveKind::kReduceScatter:
      send_bytes = a.count * elem * n;
      recv_bytes = a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      // In place: recv == send + rank * count.
      if (a.recv == static_cast<const uint8_t*>(a.send) + rank * a.count * elem) check_overlap = false;
      break;
    case CollectiveKind::kAllToAll:
      send_bytes = recv_bytes = a.count * elem * n;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      break;
    case CollectiveKind::kAllToAllV: {
      if (a.send_counts.size() != n || a.send_displs.size() != n || a.recv_counts.size() != n ||
          a.recv_displs.size() != n) {
        return InvalidArgument("{}: counts/displacements must have {} entries (got {}, {}, {}, {})", op, n,
                               a.send_counts.size(), a.send_displs.size(), a.recv_counts.size(),
                               a.recv_displs.size());
      }
      size_t s = 0, r = 0;
      for (size_t i = 0; i < n; ++i) {
        s = std::max(s, (a.send_displs[i] + a.send_counts[i]) * elem);
        r = std::max(r, (a.recv_displs[i] + a.recv_counts[i]) * elem);
      }
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", s > 0));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", r > 0));
      if (Overlap(a.send, s, a.recv, r)) {
        return InvalidArgument("{}: send and recv buffers overlap (in-place all_to_allv is not supported)", op);
      }
      check_overlap = false;
      break;
    }
    case CollectiveKind::kGather:
      TESSERA_RETURN_IF_ERROR(root_ok());
      send_bytes = a.count * elem;
      recv_bytes = rank == a.root ? a.count * elem * n : 0;
      inplace_offset = a.root * a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty && rank == a.root));
      break;
    case CollectiveKind::kScatter:
      TESSERA_RETURN_IF_ERROR(root_ok());
      send_bytes = rank == a.root ? a.count * elem * n : 0;
      recv_bytes = a.count * elem;
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty && rank == a.root));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", nonempty));
      if (rank == a.root && a.recv == static_cast<const uint8_t*>(a.send) + a.root * a.count * elem) {
        check_overlap = false;
      }
      break;
    case CollectiveKind::kBarrier:
      check_overlap = false;
      break;
    case CollectiveKind::kSend:
    case CollectiveKind::kRecv:
      if (a.peer < 0 || a.peer >= size || a.peer == rank) {
        return InvalidArgument("{}: peer {} must be another rank of [0, {}) (this is rank {})", op, a.peer, size,
                               rank);
      }
      TESSERA_RETURN_IF_ERROR(need(a.kind == CollectiveKind::kSend ? a.send : a.recv, "message", nonempty));
      check_overlap = false;
      break;
    case CollectiveKind::kSendRecv:
      if (a.peer < 0 || a.peer >= size || a.recv_peer < 0 || a.recv_peer >= size ||
          ((a.peer == rank) != (a.recv_peer == rank))) {
        return InvalidArgument("{}: peers {} (send) and {} (recv) must be ranks of [0, {}); self only for both", op,
                               a.peer, a.recv_peer, size);
      }
      TESSERA_RETURN_IF_ERROR(need(a.send, "send", nonempty));
      TESSERA_RETURN_IF_ERROR(need(a.recv, "recv", a.recv_count > 0));
      send_bytes = a.count * elem;
      recv_bytes = a.recv_count * elem;
      break;
  }
  if (check_overlap && a.send != a.recv &&
      !(inplace_offset > 0 && a.send == static_cast<const uint8_t*>(a.recv) + inplace_offset) &&
      Overlap(a.send, send_bytes, a.recv, recv_bytes)) {
    return InvalidArgument("{}: send and recv buffers overlap but are not the in-place layout (see api/types.h)", op);
  }
  return Status::Ok();
}

Work Communicator::SubmitAsync(CollectiveArgs args) {
  Status st = impl_->Validate(args);
  if (!st.ok()) return Work::Done(std::move(st));
  auto state = std::make_shared<WorkState>();
  state->args = std::move(args);
  Work work(state);
  impl_->executor->Submit(std::move(state));
  return work;
}

Status Communicator::Run(const CollectiveArgs& args) {
  TESSERA_RETURN_IF_ERROR(impl_->Validate(args));
  return impl_->executor->RunBlocking(args);
}

namespace {
CollectiveArgs CustomArgs(const char* label, std::function<Status(algo::AlgoEnv&)> fn) {
  CollectiveArgs a;
  a.custom = std::move(fn);
  a.custom_label = label;
  return a;
}
}  // namespace

Status Communicator::RunCustom(const char* label, std::function<Status(algo::AlgoEnv&)> fn) {
  return Run(CustomArgs(label, std::move(fn)));
}

Work Communicator::SubmitCustom(const char* label, std::function<Status(algo::AlgoEnv&)> fn) {
  return SubmitAsync(CustomArgs(label, std::move(fn)));
}

namespace {

CollectiveArgs Args(CollectiveKind kind, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op = ReduceOp::kSum, int root = 0) {
  CollectiveArgs a;
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

CollectiveArgs VArgs(const void* send, std::vector<size_t> sc, std::vector<size_t> sd, void* recv,
                     std::vector<size_t> rc, std::vector<size_t> rd, DataType dtype) {
  CollectiveArgs a = Args(CollectiveKind::kAllToAllV, send, recv, 0, dtype);
  a.send_counts = std::move(sc);
  a.send_displs = std::move(sd);
  a.recv_counts = std::move(rc);
  a.recv_displs = std::move(rd);
  return a;
}

CollectiveArgs P2p(CollectiveKind kind, const void* send, void* recv, size_t count, DataType dtype, int peer,
                   uint32_t tag) {
  CollectiveArgs a = Args(kind, send, recv, count, dtype);
  a.peer = peer;
  a.tag = tag;
  return a;
}

CollectiveArgs SendRecvArgs(const void* send, size_t send_count, int send_peer, void* recv, size_t recv_count,
                            int recv_peer, DataType dtype, uint32_t tag) {
  CollectiveArgs a = P2p(CollectiveKind::kSendRecv, send, recv, send_count, dtype, send_peer, tag);
  a.recv_peer = recv_peer;
  a.recv_count = recv_count;
  return a;
}

}  // namespace

Work Communicator::AllReduceAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return SubmitAsync(Args(CollectiveKind::kAllReduce, send, recv, count, dtype, op));
}
Work Communicator::ReduceAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root) {
  return SubmitAsync(Args(CollectiveKind::kReduce, send, recv, count, dtype, op, root));
}
Work Communicator::BroadcastAsync(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return SubmitAsync(Args(CollectiveKind::kBroadcast, send, recv, count, dtype, ReduceOp::kSum, root));
}
Work Communicator::AllGatherAsync(const void* send, void* recv, size_t count, DataType dtype) {
  return SubmitAsync(Args(CollectiveKind::kAllGather, send, recv, count, dtype));
}
Work Communicator::ReduceScatterAsync(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return SubmitAsync(Args(CollectiveKind::kReduceScatter, send, recv, count, dtype, op));
}
Work Communicator::AllToAllAsync(const void* send, void* recv, size_t count, DataType dtype) {
  return SubmitAsync(Args(CollectiveKind::kAllToAll, send, recv, count, dtype));
}
Work Communicator::AllToAllVAsync(const void* send, std::vector<size_t> send_counts, std::vector<size_t> send_displs,
                                  void* recv, std::vector<size_t> recv_counts, std::vector<size_t> recv_displs,
                                  DataType dtype) {
  return SubmitAsync(VArgs(send, std::move(send_counts), std::move(send_displs), recv, std::move(recv_counts),
                           std::move(recv_displs), dtype));
}
Work Communicator::GatherAsync(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return SubmitAsync(Args(CollectiveKind::kGather, send, recv, count, dtype, ReduceOp::kSum, root));
}
Work Communicator::ScatterAsync(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return SubmitAsync(Args(CollectiveKind::kScatter, send, recv, count, dtype, ReduceOp::kSum, root));
}
Work Communicator::BarrierAsync() {
  return SubmitAsync(Args(CollectiveKind::kBarrier, nullptr, nullptr, 0, DataType::kUint8));
}
Work Communicator::SendAsync(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return SubmitAsync(P2p(CollectiveKind::kSend, buf, nullptr, count, dtype, peer, tag));
}
Work Communicator::RecvAsync(void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return SubmitAsync(P2p(CollectiveKind::kRecv, nullptr, buf, count, dtype, peer, tag));
}
Work Communicator::SendRecvAsync(const void* send, size_t send_count, int send_peer, void* recv, size_t recv_count,
                                 int recv_peer, DataType dtype, uint32_t tag) {
  return SubmitAsync(SendRecvArgs(send, send_count, send_peer, recv, recv_count, recv_peer, dtype, tag));
}

Status Communicator::AllReduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Run(Args(CollectiveKind::kAllReduce, send, recv, count, dtype, op));
}
Status Communicator::Reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root) {
  return Run(Args(CollectiveKind::kReduce, send, recv, count, dtype, op, root));
}
Status Communicator::Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return Run(Args(CollectiveKind::kBroadcast, send, recv, count, dtype, ReduceOp::kSum, root));
}
Status Communicator::AllGather(const void* send, void* recv, size_t count, DataType dtype) {
  return Run(Args(CollectiveKind::kAllGather, send, recv, count, dtype));
}
Status Communicator::ReduceScatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  return Run(Args(CollectiveKind::kReduceScatter, send, recv, count, dtype, op));
}
Status Communicator::AllToAll(const void* send, void* recv, size_t count, DataType dtype) {
  return Run(Args(CollectiveKind::kAllToAll, send, recv, count, dtype));
}
Status Communicator::AllToAllV(const void* send, std::vector<size_t> send_counts, std::vector<size_t> send_displs,
                               void* recv, std::vector<size_t> recv_counts, std::vector<size_t> recv_displs,
                               DataType dtype) {
  return Run(VArgs(send, std::move(send_counts), std::move(send_displs), recv, std::move(recv_counts),
                   std::move(recv_displs), dtype));
}
Status Communicator::Gather(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return Run(Args(CollectiveKind::kGather, send, recv, count, dtype, ReduceOp::kSum, root));
}
Status Communicator::Scatter(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return Run(Args(CollectiveKind::kScatter, send, recv, count, dtype, ReduceOp::kSum, root));
}
Status Communicator::Barrier() { return Run(Args(CollectiveKind::kBarrier, nullptr, nullptr, 0, DataType::kUint8)); }
Status Communicator::Send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return Run(P2p(CollectiveKind::kSend, buf, nullptr, count, dtype, peer, tag));
}
Status Communicator::Recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return Run(P2p(CollectiveKind::kRecv, nullptr, buf, count, dtype, peer, tag));
}
Status Communicator::SendRecv(const void* send, size_t send_count, int send_peer, void* recv, size_t recv_count,
                              int recv_peer, DataType dtype, uint32_t tag) {
  return Run(SendRecvArgs(send, send_count, send_peer, recv, recv_count, recv_peer, dtype, tag));
}

}  // namespace tessera::comm

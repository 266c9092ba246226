// Collectives, point to point and PreMulSum operators of the NCCL C API:
// each call checks its arguments, maps NCCL's types and operators onto
// Tessera's, and issues one Communicator operation (now, on a stream, or
// at group end). PreMulSum scales the input into a temporary, then sums.
#include <cstring>
#include <fmt/format.h>

#include "tessera/base/float16.h"
#include "tessera/nccl/internal.h"

using tessera::Status;
using tessera::StatusOr;
using tessera::comm::CollectiveArgs;
using tessera::comm::CollectiveKind;
using tessera::comm::DataType;
using tessera::comm::ReduceOp;
using namespace tessera::nccl;

namespace {

const char* TypeName(ncclDataType_t t) {
  static const char* kNames[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                 "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                 "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return (t >= 0 && t < ncclNumTypes) ? kNames[t] : "unknown";
}

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// NCCL's type as Tessera's. Unsigned 32/64-bit types travel as the signed
// type of the same width (sum and prod wrap identically); fp8 travels as
// bytes. `op` is the reduction, or -1 for data movement.
StatusOr<DataType> MapType(const char* fn, ncclDataType_t t, int op) {
  const bool reduces = op >= 0;
  switch (t) {
    case ncclInt8: return DataType::kInt8;
    case ncclUint8: return DataType::kUint8;
    case ncclInt32: return DataType::kInt32;
    case ncclInt64: return DataType::kInt64;
    case ncclFloat16: return DataType::kFloat16;
    case ncclFloat32: return DataType::kFloat32;
    case ncclFloat64: return DataType::kFloat64;
    case ncclBfloat16: return DataType::kBFloat16;
    case ncclUint32:
    case ncclUint64:
      if (reduces && op != ncclSum && op != ncclProd) {
        return tessera::InvalidArgument("{}: {} reduces with ncclSum or ncclProd only in Tessera", fn, TypeName(t));
      }
      return t == ncclUint32 ? DataType::kInt32 : DataType::kInt64;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      if (reduces) return tessera::InvalidArgument("{}: {} cannot be reduced in Tessera (data movement only)", fn, TypeName(t));
      return DataType::kUint8;
    default: break;
  }
  return tessera::InvalidArgument("{}: unknown datatype {}", fn, static_cast<int>(t));
}

// Scales `n` elements of `src` by the operator's scalar into `dst`.
template <typename T>
void ScaleAs(const void* src, void* dst, size_t n, T scalar) {
  const T* s = static_cast<const T*>(src);
  T* d = static_cast<T*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(s[i] * scalar);
}
template <typename H>
void ScaleHalf(const void* src, void* dst, size_t n, float scalar) {
  const H* s = static_cast<const H*>(src);
  H* d = static_cast<H*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = H(s[i].ToFloat() * scalar);
}

Status Scale(const PreMulSum& p, ncclDataType_t t, const void* src, void* dst, size_t n) {
  double v = p.value;
  int64_t iv = p.ivalue;
  if (!p.immediate) {  // read the scalar now
    switch (p.dtype) {
      case ncclFloat32: v = *static_cast<const float*>(p.pointer); break;
      case ncclFloat64: v = *static_cast<const double*>(p.pointer); break;
      case ncclFloat16: v = static_cast<const tessera::fp16*>(p.pointer)->ToFloat(); break;
      case ncclBfloat16: v = static_cast<const tessera::bf16*>(p.pointer)->ToFloat(); break;
      case ncclInt8: iv = *static_cast<const int8_t*>(p.pointer); break;
      case ncclUint8: iv = *static_cast<const uint8_t*>(p.pointer); break;
      case ncclInt32: case ncclUint32: iv = *static_cast<const int32_t*>(p.pointer); break;
      default: iv = *static_cast<const int64_t*>(p.pointer); break;
    }
  }
  switch (t) {
    case ncclFloat32: ScaleAs<float>(src, dst, n, static_cast<float>(v)); break;
    case ncclFloat64: ScaleAs<double>(src, dst, n, v); break;
    case ncclFloat16: ScaleHalf<tessera::fp16>(src, dst, n, static_cast<float>(v)); break;
    case ncclBfloat16: ScaleHalf<tessera::bf16>(src, dst, n, static_cast<float>(v)); break;
    case ncclInt8: ScaleAs<int8_t>(src, dst, n, static_cast<int8_t>(iv)); break;
    case ncclUint8: ScaleAs<uint8_t>(src, dst, n, static_cast<uint8_t>(iv)); break;
    case ncclInt32: ScaleAs<int32_t>(src, dst, n, static_cast<int32_t>(iv)); break;
    case ncclUint32: ScaleAs<uint32_t>(src, dst, n, static_cast<uint32_t>(iv)); break;
    case ncclInt64: ScaleAs<int64_t>(src, dst, n, iv); break;
    case ncclUint64: ScaleAs<uint64_t>(src, dst, n, static_cast<uint64_t>(iv)); break;
    default: return tessera::InvalidArgument("PreMulSum: {} is not supported", TypeName(t));
  }
  return Status();
}

// Builds and issues one operation. `in_count` elements are read from
// `send` (PreMulSum scales them into a temporary first).
ncclResult_t Submit(const char* fn, ncclComm* comm, tesseraStream* stream, CollectiveKind kind, const void* send,
                    void* recv, size_t count, size_t in_count, ncclDataType_t type, int op, int root) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, fmt::format("{}: comm is NULL", fn));
  auto c = comm->Get();
  if (!c.ok()) return Fail(c.status().WithContext(fn));
  const int n = comm->nranks;
  if (kind == CollectiveKind::kReduceScatter) in_count = count * static_cast<size_t>(n);
  if (root < 0 || root >= n) {
    return Fail(ncclInvalidArgument, fmt::format("{}: {} {} outside [0, {}) (rank {})", fn,
                                                 kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv ? "peer" : "root",
                                                 root, n, comm->rank));
  }
  const bool p2p = kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
  const bool needs_send = !p2p || kind == CollectiveKind::kSend;
  const bool needs_recv = !p2p || kind == CollectiveKind::kRecv;
  if (count > 0 && ((needs_send && send == nullptr && kind != CollectiveKind::kBroadcast &&
                     kind != CollectiveKind::kScatter) ||
                    (needs_recv && recv == nullptr && kind != CollectiveKind::kReduce && kind != CollectiveKind::kGather))) {
    return Fail(ncclInvalidArgument, fmt::format("{}: NULL buffer with count {} (rank {})", fn, count, comm->rank));
  }
  PendingOp pending;
  pending.comm = comm;
  pending.stream = stream;
  CollectiveArgs& a = pending.args;
  a.kind = kind;
  a.send = send;
  a.recv = recv;
  a.count = count;
  const bool is_p2p = kind == CollectiveKind::kSend || kind == CollectiveKind::kRecv;
  a.root = is_p2p ? 0 : root;
  a.peer = is_p2p ? root : -1;
  if (op >= ncclNumOps) {  // PreMulSum
    PreMulSum pm;
    {
      std::lock_guard<std::mutex> lock(comm->ops_mu);
      auto it = comm->premulsum.find(op);
      if (it == comm->premulsum.end()) {
        return Fail(ncclInvalidArgument, fmt::format("{}: unknown reduction operator {} (destroyed?)", fn, op));
      }
      pm = it->second;
    }
    if (pm.dtype != type) {
      return Fail(ncclInvalidArgument, fmt::format("{}: PreMulSum operator {} was made for {}, used with {}", fn, op,
                                                   TypeName(pm.dtype), TypeName(type)));
    }
    auto dt = MapType(fn, type, ncclSum);
    if (!dt.ok()) return Fail(dt.status());
    a.dtype = *dt;
    a.op = ReduceOp::kSum;
    if (send != nullptr && in_count > 0) {
      std::shared_ptr<uint8_t[]> tmp(new uint8_t[in_count * TypeSize(type)]);
      Status st = Scale(pm, type, send, tmp.get(), in_count);
      if (!st.ok()) return Fail(st.WithContext(fn));
      a.send = tmp.get();
      pending.keep = tmp;
    }
  } else {
    if (op != -1 && (op < 0 || op >= ncclNumOps)) {
      return Fail(ncclInvalidArgument, fmt::format("{}: invalid reduction operator {}", fn, op));
    }
    auto dt = MapType(fn, type, op);
    if (!dt.ok()) return Fail(dt.status());
    a.dtype = *dt;
    static constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg};
    if (op >= 0) a.op = kOps[op];
  }
  if (is_p2p) {  // bytes, whatever the type: both ends match however they were typed
    a.count = count * TypeSize(type);
    a.dtype = DataType::kUint8;
  }
  if (InGroup()) {
    GroupAdd(std::move(pending));
    return ncclSuccess;
  }
  return IssueNow(std::move(pending));
}

}  // namespace

namespace tessera::nccl {

ncclResult_t IssueNow(PendingOp op) {
  comm::Communicator* c = op.comm->comm.get();
  if (op.stream == nullptr) return Fail(c->Run(op.args));
  comm::Work w = c->SubmitAsync(std::move(op.args));
  return Fail(op.stream->Enqueue(std::move(w), op.comm, std::move(op.keep)));
}

}  // namespace tessera::nccl

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclAllReduce", comm, stream, CollectiveKind::kAllReduce, sendbuff, recvbuff, count, count, datatype,
                op, 0);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclReduce", comm, stream, CollectiveKind::kReduce, sendbuff, recvbuff, count, count, datatype, op,
                root);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclBroadcast", comm, stream, CollectiveKind::kBroadcast, sendbuff, recvbuff, count, count, datatype,
                -1, root);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return Submit("ncclBcast", comm, stream, CollectiveKind::kBroadcast, buff, buff, count, count, datatype, -1, root);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclAllGather", comm, stream, CollectiveKind::kAllGather, sendbuff, recvbuff, sendcount, sendcount,
                datatype, -1, 0);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclReduceScatter", comm, stream, CollectiveKind::kReduceScatter, sendbuff, recvbuff, recvcount,
                recvcount, datatype, op, 0);  // reads recvcount * nranks (set in Submit)
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclAlltoAll", comm, stream, CollectiveKind::kAllToAll, sendbuff, recvbuff, count, count, datatype,
                -1, 0);
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclGather", comm, stream, CollectiveKind::kGather, sendbuff, recvbuff, count, count, datatype, -1,
                root);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return Submit("ncclScatter", comm, stream, CollectiveKind::kScatter, sendbuff, recvbuff, count, count, datatype, -1,
                root);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return Submit("ncclSend", comm, stream, CollectiveKind::kSend, sendbuff, nullptr, count, count, datatype, -1, peer);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return Submit("ncclRecv", comm, stream, CollectiveKind::kRecv, nullptr, recvbuff, count, count, datatype, -1, peer);
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  if (op == nullptr || scalar == nullptr || comm == nullptr) {
    return Fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op, scalar or comm is NULL");
  }
  if (datatype < 0 || datatype >= ncclNumTypes || datatype == ncclFloat8e4m3 || datatype == ncclFloat8e5m2) {
    return Fail(ncclInvalidArgument, fmt::format("ncclRedOpCreatePreMulSum: datatype {} ({}) not supported",
                                                 static_cast<int>(datatype), TypeName(datatype)));
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    return Fail(ncclInvalidArgument, fmt::format("ncclRedOpCreatePreMulSum: bad residence {}", static_cast<int>(residence)));
  }
  PreMulSum p{datatype, residence == ncclScalarHostImmediate, 0.0, 0, scalar};
  if (p.immediate) {
    switch (datatype) {
      case ncclFloat32: p.value = *static_cast<const float*>(scalar); break;
      case ncclFloat64: p.value = *static_cast<const double*>(scalar); break;
      case ncclFloat16: p.value = static_cast<const tessera::fp16*>(scalar)->ToFloat(); break;
      case ncclBfloat16: p.value = static_cast<const tessera::bf16*>(scalar)->ToFloat(); break;
      case ncclInt8: p.ivalue = *static_cast<const int8_t*>(scalar); break;
      case ncclUint8: p.ivalue = *static_cast<const uint8_t*>(scalar); break;
      case ncclInt32: case ncclUint32: p.ivalue = *static_cast<const int32_t*>(scalar); break;
      default: p.ivalue = *static_cast<const int64_t*>(scalar); break;
    }
    p.pointer = nullptr;
  }
  std::lock_guard<std::mutex> lock(comm->ops_mu);
  const int id = comm->next_op++;
  comm->premulsum[id] = p;
  *op = static_cast<ncclRedOp_t>(id);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (comm == nullptr) return Fail(ncclInvalidArgument, "ncclRedOpDestroy: comm is NULL");
  if (static_cast<int>(op) < ncclNumOps) {
    return Fail(ncclInvalidArgument, fmt::format("ncclRedOpDestroy: {} is a built-in operator", static_cast<int>(op)));
  }
  std::lock_guard<std::mutex> lock(comm->ops_mu);
  if (comm->premulsum.erase(static_cast<int>(op)) == 0) {
    return Fail(ncclInvalidArgument, fmt::format("ncclRedOpDestroy: unknown operator {}", static_cast<int>(op)));
  }
  return ncclSuccess;
}

}  // extern "C"

// Element types and reduction operators of the communication library, and
// the description of one collective call (CollectiveArgs) that the API layer
// hands to the algorithm layer. Plain values; thread-safe.
//
// Count conventions (elements of `dtype`, as in NCCL):
//   all_reduce, reduce, broadcast: `count` in send and recv.
//   all_gather:     send `count`, recv `count * size` (rank r's block at r*count).
//   reduce_scatter: send `count * size`, recv `count` (block r of the result).
//   all_to_all:     `count` per peer; send and recv hold `count * size`.
//   all_to_allv:    per-peer counts and displacements (elements).
//   gather:         send `count`; recv `count * size` at the root.
//   scatter:        send `count * size` at the root; recv `count`.
//   send / recv:    `count` elements to / from `peer`.
//   send_recv:      `count` to `peer` and `recv_count` from `recv_peer`.
// In place: send == recv (all_gather: send == recv + rank*count;
// reduce_scatter: recv == send + rank*count; gather at the root: send ==
// recv + root*count; scatter at the root: recv == send + root*count).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm {

namespace algo {
struct AlgoEnv;
}

enum class DataType : uint8_t { kFloat32, kFloat64, kBFloat16, kFloat16, kInt8, kUint8, kInt32, kInt64 };
enum class ReduceOp : uint8_t { kSum, kProd, kMin, kMax, kAvg };

inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kBFloat16,
                                             DataType::kFloat16, DataType::kInt8,    DataType::kUint8,
                                             DataType::kInt32,   DataType::kInt64};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                                             ReduceOp::kAvg};

size_t DataTypeSize(DataType dtype);
// "float32", "bfloat16", "int8", ... (nccl-tests prints "float", "bfloat16").
std::string_view DataTypeName(DataType dtype);
// nccl-tests' spelling: float, double, bfloat16, half, int8, uint8, int32, int64.
std::string_view DataTypeNcclName(DataType dtype);
// Accepts both spellings and short forms (fp32, f32, bf16, fp16, float, half, i8, ...).
StatusOr<DataType> ParseDataType(std::string_view text);
bool IsFloatingPoint(DataType dtype);

std::string_view ReduceOpName(ReduceOp op);  // sum, prod, min, max, avg
StatusOr<ReduceOp> ParseReduceOp(std::string_view text);

enum class CollectiveKind : uint8_t {
  kAllReduce,
  kReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllToAllV,
  kGather,
  kScatter,
  kBarrier,
  kSend,
  kRecv,
  kSendRecv,
};
// "all_reduce", "reduce_scatter", ... (used in logs and errors).
std::string_view CollectiveName(CollectiveKind kind);
inline constexpr int kNumCollectiveKinds = 13;

struct CollectiveArgs {
  CollectiveKind kind = CollectiveKind::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;  // reduce, broadcast, gather, scatter
  int peer = -1; // send, recv; the destination of send_recv
  uint32_t tag = 0;
  int recv_peer = -1;     // send_recv: the source
  size_t recv_count = 0;  // send_recv: elements received
  // all_to_allv only (elements, indexed by peer rank).
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
  // A library-internal operation (Communicator::RunCustom, e.g. comm/moe):
  // runs `custom` instead of a collective, named `custom_label` in logs
  // and errors; the other fields are unused.
  std::function<Status(algo::AlgoEnv&)> custom;
  const char* custom_label = nullptr;

  size_t ElementSize() const { return DataTypeSize(dtype); }
  // Bytes this rank sends/receives in the op's natural unit (all_reduce:
  // count * elem); used by the cost model and ccl-perf.
  size_t Bytes() const { return count * ElementSize(); }
};

}  // namespace tessera::comm

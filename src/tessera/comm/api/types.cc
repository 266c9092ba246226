#include "tessera/comm/api/types.h"

#include <algorithm>
#include <cctype>

namespace tessera::comm {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

size_t DataTypeSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kBFloat16: return 2;
    case DataType::kFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUint8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
  }
  return 1;
}

std::string_view DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat16: return "float16";
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
  }
  return "?";
}

std::string_view DataTypeNcclName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat16: return "half";
    default: return DataTypeName(dtype);
  }
}

StatusOr<DataType> ParseDataType(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "float32" || t == "fp32" || t == "f32" || t == "float") return DataType::kFloat32;
  if (t == "float64" || t == "fp64" || t == "f64" || t == "double") return DataType::kFloat64;
  if (t == "bfloat16" || t == "bf16") return DataType::kBFloat16;
  if (t == "float16" || t == "fp16" || t == "f16" || t == "half") return DataType::kFloat16;
  if (t == "int8" || t == "i8" || t == "char") return DataType::kInt8;
  if (t == "uint8" || t == "u8") return DataType::kUint8;
  if (t == "int32" || t == "i32" || t == "int") return DataType::kInt32;
  if (t == "int64" || t == "i64") return DataType::kInt64;
  return InvalidArgument(
      "unknown data type '{}' (expected float32|fp32|float, float64|double, bfloat16|bf16, float16|fp16|half, int8, "
      "uint8, int32, int64)",
      text);
}

bool IsFloatingPoint(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat64 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat16;
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "?";
}

StatusOr<ReduceOp> ParseReduceOp(std::string_view text) {
  const std::string t = Lower(text);
  if (t == "sum") return ReduceOp::kSum;
  if (t == "prod" || t == "product") return ReduceOp::kProd;
  if (t == "min") return ReduceOp::kMin;
  if (t == "max") return ReduceOp::kMax;
  if (t == "avg" || t == "mean") return ReduceOp::kAvg;
  return InvalidArgument("unknown reduction '{}' (expected sum, prod, min, max, avg)", text);
}

std::string_view CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "all_to_all";
    case CollectiveKind::kAllToAllV: return "all_to_allv";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kSend: return "send";
    case CollectiveKind::kRecv: return "recv";
    case CollectiveKind::kSendRecv: return "send_recv";
  }
  return "?";
}

}  // namespace tessera::comm

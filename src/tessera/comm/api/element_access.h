// Element-wise access to a buffer of any communication DataType through
// double (for checks and test patterns, not for the data path). Integer
// types truncate; bf16/fp16 round to nearest even. Also the reference
// combine step of a reduction. Thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "tessera/base/float16.h"
#include "tessera/comm/api/types.h"

namespace tessera::comm {

// acc ⊕ v for a reduction op (avg accumulates a sum; divide afterwards).
inline double ReduceReference(ReduceOp op, double acc, double v) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return acc + v;
    case ReduceOp::kProd: return acc * v;
    case ReduceOp::kMin: return std::min(acc, v);
    case ReduceOp::kMax: return std::max(acc, v);
  }
  return acc;
}

inline void SetElement(void* buf, DataType dtype, size_t i, double v) {
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
    case DataType::kBFloat16: static_cast<bf16*>(buf)[i] = bf16(static_cast<float>(v)); break;
    case DataType::kFloat16: static_cast<fp16*>(buf)[i] = fp16(static_cast<float>(v)); break;
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case DataType::kUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
  }
}

inline double GetElement(const void* buf, DataType dtype, size_t i) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
    case DataType::kBFloat16: return static_cast<float>(static_cast<const bf16*>(buf)[i]);
    case DataType::kFloat16: return static_cast<float>(static_cast<const fp16*>(buf)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
  }
  return 0;
}

}  // namespace tessera::comm

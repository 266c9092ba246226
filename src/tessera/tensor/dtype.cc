#include "tessera/tensor/dtype.h"

namespace tessera {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "?";
}

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "fp32" || name == "float32" || name == "f32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp16" || name == "float16" || name == "f16") return DType::kF16;
  if (name == "int32" || name == "i32") return DType::kI32;
  if (name == "int64" || name == "i64") return DType::kI64;
  return InvalidArgument("unknown dtype '{}' (expected fp32, bf16, fp16, int32 or int64)", name);
}

}  // namespace tessera

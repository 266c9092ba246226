#include "tessera/onnx/value.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace tessera::onnx {

size_t ElemSize(ElemType t) {
  switch (t) {
    case ElemType::kFloat: return 4;
    case ElemType::kUint8: return 1;
    case ElemType::kInt8: return 1;
    case ElemType::kUint16: return 2;
    case ElemType::kInt16: return 2;
    case ElemType::kInt32: return 4;
    case ElemType::kInt64: return 8;
    case ElemType::kBool: return 1;
    case ElemType::kFloat16: return 2;
    case ElemType::kDouble: return 8;
    case ElemType::kUint32: return 4;
    case ElemType::kUint64: return 8;
    case ElemType::kBFloat16: return 2;
    default: return 0;
  }
}

std::string_view ElemName(ElemType t) {
  switch (t) {
    case ElemType::kUndefined: return "undefined";
    case ElemType::kFloat: return "float";
    case ElemType::kUint8: return "uint8";
    case ElemType::kInt8: return "int8";
    case ElemType::kUint16: return "uint16";
    case ElemType::kInt16: return "int16";
    case ElemType::kInt32: return "int32";
    case ElemType::kInt64: return "int64";
    case ElemType::kString: return "string";
    case ElemType::kBool: return "bool";
    case ElemType::kFloat16: return "float16";
    case ElemType::kDouble: return "double";
    case ElemType::kUint32: return "uint32";
    case ElemType::kUint64: return "uint64";
    case ElemType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

StatusOr<ElemType> ElemTypeFromProto(int32_t data_type) {
  switch (data_type) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 8:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 16: return static_cast<ElemType>(data_type);
    case 14:
    case 15: return Unimplemented("complex element types (TensorProto data_type {}) are not supported", data_type);
    default: return InvalidArgument("unknown TensorProto data_type {}", data_type);
  }
}

bool IsFloatType(ElemType t) {
  return t == ElemType::kFloat || t == ElemType::kDouble || t == ElemType::kFloat16 || t == ElemType::kBFloat16;
}

bool IsIntegerType(ElemType t) {
  switch (t) {
    case ElemType::kUint8:
    case ElemType::kInt8:
    case ElemType::kUint16:
    case ElemType::kInt16:
    case ElemType::kInt32:
    case ElemType::kInt64:
    case ElemType::kUint32:
    case ElemType::kUint64: return true;
    default: return false;
  }
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return INT64_MAX;  // saturates: no valid shape holds that many
  }
  return n;
}

std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

Array::Array(ElemType type, std::vector<int64_t> shape) : type_(type), shape_(std::move(shape)) {
  for (int64_t d : shape_) TESSERA_CHECK(d >= 0, "negative dimension {} in {}", d, ShapeString());
  // Shapes can come from a model's data (ConstantOfShape, Expand, Range...):
  // an absurd one is an exception the interpreter turns into an error.
  numel_ = 1;
  for (int64_t d : shape_) {
    if (__builtin_mul_overflow(numel_, d, &numel_) || numel_ > kMaxElements) {
      throw std::length_error(fmt::format("a tensor of shape {} would hold more than 2^40 elements", ShapeString()));
    }
  }
  if (type_ == ElemType::kString) {
    strings_ = std::make_shared<std::vector<std::string>>(static_cast<size_t>(numel_));
  } else {
    TESSERA_CHECK(ElemSize(type_) > 0, "Array of element type {}", ElemName(type_));
    bytes_ = std::make_shared<std::vector<uint64_t>>((nbytes() + 7) / 8 + 1, 0);
  }
}

void* Array::raw() { return bytes_ ? static_cast<void*>(bytes_->data()) : nullptr; }
const void* Array::raw() const { return bytes_ ? static_cast<const void*>(bytes_->data()) : nullptr; }

Array Array::Reshaped(std::vector<int64_t> shape) const {
  TESSERA_CHECK(Numel(shape) == numel_, "reshape of {} elements to {} elements", numel_, Numel(shape));
  Array a = *this;
  a.shape_ = std::move(shape);
  return a;
}

Array Array::Clone() const {
  Array a(type_, shape_);
  if (type_ == ElemType::kString) {
    *a.strings_ = *strings_;
  } else if (nbytes() > 0) {
    std::memcpy(a.raw(), raw(), nbytes());
  }
  return a;
}

double Array::GetDouble(int64_t i) const {
  double v = 0;
  TESSERA_CHECK_OK(VisitNumeric(type_, "GetDouble", [&](auto t) {
    using T = decltype(t);
    v = ToDouble(data<T>()[i]);
  }));
  return v;
}

int64_t Array::GetInt(int64_t i) const {
  int64_t v = 0;
  TESSERA_CHECK_OK(VisitNumeric(type_, "GetInt", [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_integral_v<T>) {
      v = static_cast<int64_t>(data<T>()[i]);
    } else {  // truncated; NaN reads 0, beyond int64 saturates (no UB)
      const double d = ToDouble(data<T>()[i]);
      v = std::isnan(d)                 ? 0
          : d >= 9.2233720368547758e18  ? INT64_MAX
          : d <= -9.2233720368547758e18 ? INT64_MIN
                                        : static_cast<int64_t>(d);
    }
  }));
  return v;
}

void Array::SetDouble(int64_t i, double v) {
  TESSERA_CHECK_OK(VisitNumeric(type_, "SetDouble", [&](auto t) {
    using T = decltype(t);
    data<T>()[i] = FromDouble<T>(v);
  }));
}

namespace {

template <typename From, typename To>
To ConvertOne(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return ToDouble(v) != 0;
  } else if constexpr (std::is_integral_v<From> && std::is_integral_v<To>) {
    return static_cast<To>(v);  // modular, as numpy / ONNX Runtime
  } else if constexpr (std::is_integral_v<To>) {
    const double d = std::trunc(ToDouble(v));
    if (std::isnan(d)) return To{};
    if (d >= 9.2233720368547758e18) return static_cast<To>(INT64_MAX);
    if (d <= -9.2233720368547758e18) return static_cast<To>(INT64_MIN);
    return static_cast<To>(static_cast<int64_t>(d));
  } else if constexpr (std::is_same_v<From, double> || std::is_same_v<From, float>) {
    return FromDouble<To>(static_cast<double>(v));
  } else {
    return FromDouble<To>(ToDouble(v));
  }
}

template <typename T>
std::string FormatForString(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    const double d = ToDouble(v);
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "INF" : "-INF";
    return fmt::format("{}", static_cast<float>(d));
  }
}

}  // namespace

Array Array::CastTo(ElemType to) const {
  if (to == type_) return Clone();
  Array out(to, shape_);
  if (type_ == ElemType::kString) {
    const std::string* src = data<std::string>();
    TESSERA_CHECK_OK(VisitNumeric(to, "Cast from string", [&](auto t) {
      using T = decltype(t);
      T* dst = out.data<T>();
      for (int64_t i = 0; i < numel_; ++i) {
        if constexpr (std::is_same_v<T, bool>) {
          dst[i] = std::strtod(src[i].c_str(), nullptr) != 0;
        } else if constexpr (std::is_integral_v<T>) {
          dst[i] = static_cast<T>(std::strtoll(src[i].c_str(), nullptr, 10));
        } else {
          dst[i] = FromDouble<T>(std::strtod(src[i].c_str(), nullptr));
        }
      }
    }));
    return out;
  }
  if (to == ElemType::kString) {
    std::string* dst = out.data<std::string>();
    TESSERA_CHECK_OK(VisitNumeric(type_, "Cast to string", [&](auto t) {
      using T = decltype(t);
      const T* src = data<T>();
      for (int64_t i = 0; i < numel_; ++i) dst[i] = FormatForString(src[i]);
    }));
    return out;
  }
  TESSERA_CHECK_OK(VisitNumeric(type_, "Cast", [&](auto f) {
    using From = decltype(f);
    const From* src = data<From>();
    TESSERA_CHECK_OK(VisitNumeric(to, "Cast", [&](auto t) {
      using To = decltype(t);
      To* dst = out.data<To>();
      for (int64_t i = 0; i < numel_; ++i) dst[i] = ConvertOne<From, To>(src[i]);
    }));
  }));
  return out;
}

std::vector<int64_t> Array::ToInts() const {
  std::vector<int64_t> v(static_cast<size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) v[static_cast<size_t>(i)] = GetInt(i);
  return v;
}

std::string Array::ShapeString() const { return fmt::format("[{}]", fmt::join(shape_, ",")); }

std::vector<int64_t> BroadcastIndex(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape) {
  const size_t r = out_shape.size();
  const size_t off = r - in_shape.size();
  std::vector<int64_t> in_strides(r, 0);
  const std::vector<int64_t> s = Strides(in_shape);
  for (size_t i = 0; i < in_shape.size(); ++i) in_strides[off + i] = in_shape[i] == 1 ? 0 : s[i];
  const int64_t n = Numel(out_shape);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> coord(r, 0);
  int64_t flat = 0;
  for (int64_t k = 0; k < n; ++k) {
    idx[static_cast<size_t>(k)] = flat;
    for (size_t d = r; d-- > 0;) {
      if (++coord[d] < out_shape[d]) {
        flat += in_strides[d];
        break;
      }
      flat -= in_strides[d] * (out_shape[d] - 1);
      coord[d] = 0;
    }
  }
  return idx;
}

std::string Value::Describe() const {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kTensor: return fmt::format("tensor({}){}", ElemName(tensor.type()), tensor.ShapeString());
    case Kind::kSequence: return fmt::format("seq({})x{}", ElemName(sequence_elem), sequence.size());
    case Kind::kOptional: return optional ? fmt::format("optional({})", optional->Describe()) : "optional(empty)";
  }
  return "?";
}

}  // namespace tessera::onnx

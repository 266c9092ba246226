// ONNX runtime values: dense tensors of every ONNX element type, sequences
// of tensors, and optionals (ONNX IR "tensor", "seq(tensor)", "optional").
//
// Array is a row-major N-d tensor whose element type follows ONNX's
// TensorProto.DataType numbering. Its storage is shared between copies
// (copying an Array is cheap); kernels treat inputs as immutable and write
// only arrays they created. float16 / bfloat16 elements are Tessera's fp16 /
// bf16 (base/float16.h). Strings live in their own vector. Not thread-safe
// for concurrent writes to one array.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/check.h"
#include "tessera/base/float16.h"
#include "tessera/base/status.h"
#include "tessera/tensor/tensor.h"

namespace tessera::onnx {

enum class ElemType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUint8 = 2,
  kInt8 = 3,
  kUint16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUint32 = 12,
  kUint64 = 13,
  kBFloat16 = 16,
};

size_t ElemSize(ElemType t);                              // 0 for strings / undefined
std::string_view ElemName(ElemType t);                    // "float", "int64", ... (ONNX's names)
StatusOr<ElemType> ElemTypeFromProto(int32_t data_type);  // errors on complex / unknown
bool IsFloatType(ElemType t);                             // float, double, float16, bfloat16
bool IsIntegerType(ElemType t);                           // signed and unsigned integers (not bool)

// C++ type <-> ElemType.
template <typename T>
struct ElemOf;
template <>
struct ElemOf<float> {
  static constexpr ElemType value = ElemType::kFloat;
};
template <>
struct ElemOf<double> {
  static constexpr ElemType value = ElemType::kDouble;
};
template <>
struct ElemOf<fp16> {
  static constexpr ElemType value = ElemType::kFloat16;
};
template <>
struct ElemOf<bf16> {
  static constexpr ElemType value = ElemType::kBFloat16;
};
template <>
struct ElemOf<int8_t> {
  static constexpr ElemType value = ElemType::kInt8;
};
template <>
struct ElemOf<int16_t> {
  static constexpr ElemType value = ElemType::kInt16;
};
template <>
struct ElemOf<int32_t> {
  static constexpr ElemType value = ElemType::kInt32;
};
template <>
struct ElemOf<int64_t> {
  static constexpr ElemType value = ElemType::kInt64;
};
template <>
struct ElemOf<uint8_t> {
  static constexpr ElemType value = ElemType::kUint8;
};
template <>
struct ElemOf<uint16_t> {
  static constexpr ElemType value = ElemType::kUint16;
};
template <>
struct ElemOf<uint32_t> {
  static constexpr ElemType value = ElemType::kUint32;
};
template <>
struct ElemOf<uint64_t> {
  static constexpr ElemType value = ElemType::kUint64;
};
template <>
struct ElemOf<bool> {
  static constexpr ElemType value = ElemType::kBool;
};
template <>
struct ElemOf<std::string> {
  static constexpr ElemType value = ElemType::kString;
};

class Array {
 public:
  Array() = default;
  // Zero-filled (empty strings) array of `type` and `shape` (every dim >= 0).
  // Throws std::length_error past kMaxElements (the interpreter reports it
  // as the node's error).
  static constexpr int64_t kMaxElements = int64_t{1} << 40;
  Array(ElemType type, std::vector<int64_t> shape);
  // A scalar (rank 0) or vector holding `values`.
  template <typename T>
  static Array Scalar(T v) {
    Array a(ElemOf<T>::value, {});
    a.data<T>()[0] = v;
    return a;
  }
  template <typename T>
  static Array Vector(const std::vector<T>& v) {
    Array a(ElemOf<T>::value, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) a.data<T>()[i] = v[i];
    return a;
  }

  ElemType type() const { return type_; }
  bool defined() const { return type_ != ElemType::kUndefined; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * ElemSize(type_); }

  // Typed element access; the type must match (TESSERA_CHECK).
  template <typename T>
  T* data() {
    TESSERA_CHECK(ElemOf<T>::value == type_, "Array of {} read as {}", ElemName(type_), ElemName(ElemOf<T>::value));
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    TESSERA_CHECK(ElemOf<T>::value == type_, "Array of {} read as {}", ElemName(type_), ElemName(ElemOf<T>::value));
    return reinterpret_cast<const T*>(raw());
  }
  void* raw();
  const void* raw() const;

  // The same data with another shape of equal element count (shares storage).
  Array Reshaped(std::vector<int64_t> shape) const;
  // A deep copy (own storage).
  Array Clone() const;
  // Element i (flat index) as double / int64 (numeric and bool types).
  double GetDouble(int64_t i) const;
  int64_t GetInt(int64_t i) const;
  // Writes element i converted from double (numeric and bool types).
  void SetDouble(int64_t i, double v);
  // Converts every element to `to` (ONNX Cast semantics for numeric types:
  // float -> int truncates toward zero, to bool is != 0).
  Array CastTo(ElemType to) const;
  // Integer vector contents (int32 / int64 / other integer arrays).
  std::vector<int64_t> ToInts() const;
  std::string ShapeString() const;  // "[2,3]"

 private:
  ElemType type_ = ElemType::kUndefined;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  // Bytes for numeric types, or strings: one of the two is set.
  std::shared_ptr<std::vector<uint64_t>> bytes_;  // 8-byte aligned
  std::shared_ptr<std::vector<std::string>> strings_;
};

template <>
inline std::string* Array::data<std::string>() {
  TESSERA_CHECK(type_ == ElemType::kString, "Array of {} read as string", ElemName(type_));
  return strings_->data();
}
template <>
inline const std::string* Array::data<std::string>() const {
  TESSERA_CHECK(type_ == ElemType::kString, "Array of {} read as string", ElemName(type_));
  return strings_->data();
}

// Row-major strides (in elements) of `shape`.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape);
int64_t Numel(const std::vector<int64_t>& shape);
// Numpy-style broadcast of two shapes: tessera::BroadcastShapes
// (tensor/tensor.h), found from this namespace.
using ::tessera::BroadcastShapes;
// For each flat index of `out_shape`, the flat index into an array of
// `in_shape` broadcast to it (in_shape right-aligned, size-1 dims repeat).
std::vector<int64_t> BroadcastIndex(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape);

// A runtime value: a tensor, a sequence of tensors, or an optional.
struct Value {
  enum class Kind { kNone, kTensor, kSequence, kOptional };
  Kind kind = Kind::kNone;
  Array tensor;                                   // kTensor
  std::vector<Array> sequence;                    // kSequence
  ElemType sequence_elem = ElemType::kUndefined;  // element type of an (empty) sequence
  std::shared_ptr<Value> optional;                // kOptional: null = empty optional

  static Value Tensor(Array a) {
    Value v;
    v.kind = Kind::kTensor;
    v.tensor = std::move(a);
    return v;
  }
  static Value Sequence(std::vector<Array> items, ElemType elem) {
    Value v;
    v.kind = Kind::kSequence;
    v.sequence = std::move(items);
    v.sequence_elem = elem;
    return v;
  }
  static Value Optional(std::shared_ptr<Value> inner) {
    Value v;
    v.kind = Kind::kOptional;
    v.optional = std::move(inner);
    return v;
  }
  bool is_tensor() const { return kind == Kind::kTensor; }
  std::string Describe() const;  // "tensor(float)[2,3]", "seq(float)x4", "optional(empty)"
};

// Calls f(T{}) with T the C++ type of `t` for numeric types and bool
// (float, double, fp16, bf16, int8..int64, uint8..uint64, bool); returns
// Unimplemented naming `what` for strings / undefined.
template <typename F>
Status VisitNumeric(ElemType t, std::string_view what, F&& f) {
  switch (t) {
    case ElemType::kFloat: f(float{}); return Status::Ok();
    case ElemType::kDouble: f(double{}); return Status::Ok();
    case ElemType::kFloat16: f(fp16{}); return Status::Ok();
    case ElemType::kBFloat16: f(bf16{}); return Status::Ok();
    case ElemType::kInt8: f(int8_t{}); return Status::Ok();
    case ElemType::kInt16: f(int16_t{}); return Status::Ok();
    case ElemType::kInt32: f(int32_t{}); return Status::Ok();
    case ElemType::kInt64: f(int64_t{}); return Status::Ok();
    case ElemType::kUint8: f(uint8_t{}); return Status::Ok();
    case ElemType::kUint16: f(uint16_t{}); return Status::Ok();
    case ElemType::kUint32: f(uint32_t{}); return Status::Ok();
    case ElemType::kUint64: f(uint64_t{}); return Status::Ok();
    case ElemType::kBool: f(bool{}); return Status::Ok();
    default: return Unimplemented("{}: element type {} is not supported", what, ElemName(t));
  }
}

// Conversions used by kernels that compute in float / double.
template <typename T>
inline double ToDouble(T v) {
  if constexpr (std::is_same_v<T, fp16> || std::is_same_v<T, bf16>) {
    return static_cast<double>(v.ToFloat());
  } else {
    return static_cast<double>(v);
  }
}
template <typename T>
inline T FromDouble(double v) {
  if constexpr (std::is_same_v<T, fp16> || std::is_same_v<T, bf16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace tessera::onnx

#include "tessera/onnx/tensor_proto.h"

#include <cstring>

namespace tessera::onnx {
namespace {

// Element count of `dims`, or an error on a negative dim or a product past 2^40.
StatusOr<int64_t> CheckedNumel(const ::onnx::TensorProto& t, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return InvalidArgument("{}: negative dimension {}", what, d);
    if (d != 0 && n > (int64_t{1} << 40) / d) return InvalidArgument("{}: dims hold more than 2^40 elements", what);
    n *= d;
  }
  return n;
}

template <typename Field>
Status CheckCount(const Field& f, int64_t n, const std::string& what, const char* field) {
  if (static_cast<int64_t>(f.size()) != n) {
    return InvalidArgument("{}: {} holds {} values, the dims say {}", what, field, f.size(), n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Array> ArrayFromProto(const ::onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == ::onnx::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    return Unimplemented("{}: tensors stored in external files are not supported", what);
  }
  if (t.has_segment()) return Unimplemented("{}: segmented tensors are not supported", what);
  auto type = ElemTypeFromProto(t.data_type());
  if (!type.ok()) return InvalidArgument("{}: {}", what, type.status().message());
  TESSERA_ASSIGN_OR_RETURN(const int64_t n, CheckedNumel(t, what));
  Array a(*type, std::vector<int64_t>(t.dims().begin(), t.dims().end()));
  if (*type == ElemType::kString) {
    TESSERA_RETURN_IF_ERROR(CheckCount(t.string_data(), n, what, "string_data"));
    for (int64_t i = 0; i < n; ++i) a.data<std::string>()[i] = t.string_data(static_cast<int>(i));
    return a;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != a.nbytes()) {
      return InvalidArgument("{}: raw_data has {} bytes, {} {} elements need {}", what, t.raw_data().size(), n,
                             ElemName(*type), a.nbytes());
    }
    if (a.nbytes() > 0) std::memcpy(a.raw(), t.raw_data().data(), a.nbytes());
    return a;
  }
  switch (*type) {
    case ElemType::kFloat:
      TESSERA_RETURN_IF_ERROR(CheckCount(t.float_data(), n, what, "float_data"));
      for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = t.float_data(static_cast<int>(i));
      break;
    case ElemType::kDouble:
      TESSERA_RETURN_IF_ERROR(CheckCount(t.double_data(), n, what, "double_data"));
      for (int64_t i = 0; i < n; ++i) a.data<double>()[i] = t.double_data(static_cast<int>(i));
      break;
    case ElemType::kInt64:
      TESSERA_RETURN_IF_ERROR(CheckCount(t.int64_data(), n, what, "int64_data"));
      for (int64_t i = 0; i < n; ++i) a.data<int64_t>()[i] = t.int64_data(static_cast<int>(i));
      break;
    case ElemType::kUint32:
    case ElemType::kUint64:
      TESSERA_RETURN_IF_ERROR(CheckCount(t.uint64_data(), n, what, "uint64_data"));
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t v = t.uint64_data(static_cast<int>(i));
        if (*type == ElemType::kUint32) {
          a.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        } else {
          a.data<uint64_t>()[i] = v;
        }
      }
      break;
    default: {  // int32_data carries int32, int16, int8, uint16, uint8, bool, float16, bfloat16
      TESSERA_RETURN_IF_ERROR(CheckCount(t.int32_data(), n, what, "int32_data"));
      const size_t size = ElemSize(*type);
      auto* dst = static_cast<uint8_t*>(a.raw());
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (*type == ElemType::kBool) {
          dst[i] = v != 0;
        } else {
          std::memcpy(dst + i * static_cast<int64_t>(size), &v, size);  // little-endian low bytes
        }
      }
    }
  }
  return a;
}

void ArrayToProto(const Array& a, ::onnx::TensorProto* t) {
  t->set_data_type(static_cast<int32_t>(a.type()));
  for (int64_t d : a.shape()) t->add_dims(d);
  if (a.type() == ElemType::kString) {
    for (int64_t i = 0; i < a.numel(); ++i) t->add_string_data(a.data<std::string>()[i]);
  } else {
    t->set_raw_data(a.raw(), a.nbytes());
  }
}

}  // namespace tessera::onnx

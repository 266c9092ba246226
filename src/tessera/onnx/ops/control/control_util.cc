// Tensor slicing / stacking / concatenation helpers for the control family.
#include "tessera/onnx/ops/control/control_util.h"

#include <cstring>

namespace tessera::onnx::control {

void CopyElems(const Array& src, int64_t src_off, Array& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;
  if (src.type() == ElemType::kString) {
    const std::string* s = src.data<std::string>() + src_off;
    std::string* d = dst.data<std::string>() + dst_off;
    for (int64_t k = 0; k < n; ++k) d[k] = s[k];
    return;
  }
  const size_t es = ElemSize(src.type());
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<size_t>(dst_off) * es,
              static_cast<const char*>(src.raw()) + static_cast<size_t>(src_off) * es, static_cast<size_t>(n) * es);
}

Array SliceAxis(const Array& a, int64_t axis, int64_t index) {
  std::vector<int64_t> shape = a.shape();
  const int64_t dim = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= a.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis) + 1; d < a.rank(); ++d) inner *= a.dim(d);
  Array out(a.type(), shape);
  for (int64_t o = 0; o < outer; ++o) CopyElems(a, (o * dim + index) * inner, out, o * inner, inner);
  return out;
}

StatusOr<Array> Stack(const OpContext& ctx, const std::vector<Array>& items, int64_t axis, const char* what) {
  if (items.empty()) return ctx.Error("no {} to stack", what);
  const Array& first = items[0];
  for (size_t i = 1; i < items.size(); ++i) {
    if (items[i].type() != first.type() || items[i].shape() != first.shape()) {
      return ctx.Error("{} {} is {}{}, but {} 0 is {}{}", what, i, ElemName(items[i].type()), items[i].ShapeString(),
                       what, ElemName(first.type()), first.ShapeString());
    }
  }
  std::vector<int64_t> shape = first.shape();
  const int64_t n = static_cast<int64_t>(items.size());
  shape.insert(shape.begin() + axis, n);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= first.dim(static_cast<size_t>(d));
  for (size_t d = static_cast<size_t>(axis); d < first.rank(); ++d) inner *= first.dim(d);
  Array out(first.type(), shape);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < outer; ++o)
      CopyElems(items[static_cast<size_t>(i)], o * inner, out, (o * n + i) * inner, inner);
  }
  return out;
}

StatusOr<Array> ConcatAxis(const OpContext& ctx, const std::vector<Array>& items, int64_t axis, const char* what) {
  if (items.empty()) return ctx.Error("no {} to concatenate", what);
  const Array& first = items[0];
  const size_t ax = static_cast<size_t>(axis);
  int64_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Array& it = items[i];
    bool same = it.type() == first.type() && it.rank() == first.rank();
    for (size_t d = 0; same && d < it.rank(); ++d) same = d == ax || it.dim(d) == first.dim(d);
    if (!same) {
      return ctx.Error("{} {} is {}{}, which does not concatenate with {} 0 ({}{}) along axis {}", what, i,
                       ElemName(it.type()), it.ShapeString(), what, ElemName(first.type()), first.ShapeString(), axis);
    }
    total += it.dim(ax);
  }
  std::vector<int64_t> shape = first.shape();
  shape[ax] = total;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < ax; ++d) outer *= first.dim(d);
  for (size_t d = ax + 1; d < first.rank(); ++d) inner *= first.dim(d);
  Array out(first.type(), shape);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (const Array& it : items) {
      const int64_t len = it.dim(ax) * inner;
      CopyElems(it, o * len, out, o * total * inner + at, len);
      at += len;
    }
  }
  return out;
}

Array EmptyStacked(const ValueInfo& info) {
  std::vector<int64_t> shape = {0};
  if (info.has_shape) {
    for (int64_t d : info.dims) shape.push_back(d < 0 ? 0 : d);
  }
  const ElemType t = info.elem == ElemType::kUndefined ? ElemType::kFloat : info.elem;
  return Array(t, shape);
}

StatusOr<bool> CondInput(const OpContext& ctx, size_t i) {
  TESSERA_ASSIGN_OR_RETURN(Array c, ctx.tensor(i));
  if (c.numel() != 1) return ctx.Error("condition input {} must hold one value, has shape {}", i, c.ShapeString());
  if (c.type() == ElemType::kString) return ctx.Error("condition input {} must be bool, got string", i);
  return c.GetDouble(0) != 0;
}

}  // namespace tessera::onnx::control

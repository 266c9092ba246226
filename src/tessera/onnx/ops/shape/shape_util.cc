// Helpers shared by the shape and index families (see shape_util.h).
#include "tessera/onnx/ops/shape/shape_util.h"

#include <cstring>
#include <set>

#include "tessera/onnx/ops/kernel_util.h"

namespace tessera::onnx {

void CopyElems(const Array& src, int64_t si, Array& dst, int64_t di, int64_t n) {
  if (n <= 0) return;
  if (src.type() == ElemType::kString) {
    const std::string* s = src.data<std::string>();
    std::string* d = dst.data<std::string>();
    for (int64_t k = 0; k < n; ++k) d[di + k] = s[si + k];
    return;
  }
  const size_t es = ElemSize(src.type());
  std::memcpy(static_cast<char*>(dst.raw()) + static_cast<size_t>(di) * es,
              static_cast<const char*>(src.raw()) + static_cast<size_t>(si) * es, static_cast<size_t>(n) * es);
}

namespace {

template <typename T>
void GatherTyped(const T* s, T* d, const std::vector<int64_t>& idx) {
  for (size_t k = 0; k < idx.size(); ++k) d[k] = s[idx[k]];
}

}  // namespace

Array GatherFlat(const Array& src, const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  Array out(src.type(), shape);
  switch (ElemSize(src.type())) {
    case 1: GatherTyped(static_cast<const uint8_t*>(src.raw()), static_cast<uint8_t*>(out.raw()), idx); break;
    case 2: GatherTyped(static_cast<const uint16_t*>(src.raw()), static_cast<uint16_t*>(out.raw()), idx); break;
    case 4: GatherTyped(static_cast<const uint32_t*>(src.raw()), static_cast<uint32_t*>(out.raw()), idx); break;
    case 8: GatherTyped(static_cast<const uint64_t*>(src.raw()), static_cast<uint64_t*>(out.raw()), idx); break;
    default: GatherTyped(src.data<std::string>(), out.data<std::string>(), idx); break;
  }
  return out;
}

StatusOr<std::vector<int64_t>> IntsInputOrAttr(const OpContext& ctx, size_t i, const std::string& attr,
                                               int64_t input_since, bool* present) {
  if (ctx.opset() >= input_since) {
    if (present) *present = ctx.has_input(i);
    return IntsInput(ctx, i);
  }
  if (present) *present = ctx.node().Has(attr);
  return ctx.node().Ints(attr, {});
}

StatusOr<std::vector<int64_t>> NormalizeAxes(const OpContext& ctx, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  std::set<int64_t> seen;
  for (int64_t a : axes) {
    const int64_t n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) return ctx.Error("axis {} is out of range for rank {}", a, rank);
    if (!seen.insert(n).second) return ctx.Error("axis {} is repeated", a);
    out.push_back(n);
  }
  return out;
}

StatusOr<int64_t> CheckShape(const OpContext& ctx, const std::vector<int64_t>& shape) {
  constexpr int64_t kMaxElems = int64_t{1} << 40;
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return ctx.Error("negative dimension {} in output shape [{}]", d, fmt::join(shape, ","));
    if (d == 0) zero = true;
  }
  if (zero) return 0;
  for (int64_t d : shape) {
    if (d > kMaxElems / n) return ctx.Error("output shape [{}] is too large", fmt::join(shape, ","));
    n *= d;
  }
  return n;
}

}  // namespace tessera::onnx

// Tensors built from parameters: Range, EyeLike, and ReverseSequence
// (per-batch reversal of the leading time steps).
#include <cmath>
#include <type_traits>

#include "tessera/onnx/ops/index/index_kernels.h"
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

constexpr int64_t kMaxElems = int64_t{1} << 40;

template <typename T>
Status RangeTyped(OpContext& ctx, const Array& a, const Array& b, const Array& c) {
  const T start = a.data<T>()[0], limit = b.data<T>()[0], delta = c.data<T>()[0];
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (delta == 0) return ctx.Error("delta must not be zero");
    uint64_t n = 0;
    if (delta > 0 && limit > start) {
      n = ((static_cast<uint64_t>(static_cast<int64_t>(limit)) - static_cast<uint64_t>(static_cast<int64_t>(start))) -
           1) /
              static_cast<uint64_t>(static_cast<int64_t>(delta)) +
          1;
    } else if (delta < 0 && limit < start) {
      n = ((static_cast<uint64_t>(static_cast<int64_t>(start)) - static_cast<uint64_t>(static_cast<int64_t>(limit))) -
           1) /
              (uint64_t{0} - static_cast<uint64_t>(static_cast<int64_t>(delta))) +
          1;
    }
    if (n > static_cast<uint64_t>(kMaxElems)) return ctx.Error("range of {} elements is too large", n);
    Array out(ElemOf<T>::value, {static_cast<int64_t>(n)});
    T* o = out.data<T>();
    U v = static_cast<U>(start);
    for (uint64_t i = 0; i < n; ++i, v = static_cast<U>(v + static_cast<U>(delta))) o[i] = static_cast<T>(v);
    ctx.set_output(0, out);
  } else {
    const double s = ToDouble(start), l = ToDouble(limit), d = ToDouble(delta);
    if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
      return ctx.Error("invalid range start {} limit {} delta {}", s, l, d);
    }
    const double count = std::max(std::ceil((l - s) / d), 0.0);
    if (count > static_cast<double>(kMaxElems)) return ctx.Error("range of {} elements is too large", count);
    const int64_t n = static_cast<int64_t>(count);
    Array out(ElemOf<T>::value, {n});
    T* o = out.data<T>();
    for (int64_t i = 0; i < n; ++i) o[i] = FromDouble<T>(s + static_cast<double>(i) * d);
    ctx.set_output(0, out);
  }
  return Status::Ok();
}

}  // namespace

Status RangeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array b, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(Array c, ctx.tensor(2));
  if (a.type() != b.type() || a.type() != c.type()) return ctx.Error("start, limit and delta must share a type");
  if (a.numel() != 1 || b.numel() != 1 || c.numel() != 1) return ctx.Error("start, limit and delta must be scalars");
  switch (a.type()) {
    case ElemType::kFloat: return RangeTyped<float>(ctx, a, b, c);
    case ElemType::kDouble: return RangeTyped<double>(ctx, a, b, c);
    case ElemType::kInt16: return RangeTyped<int16_t>(ctx, a, b, c);
    case ElemType::kInt32: return RangeTyped<int32_t>(ctx, a, b, c);
    case ElemType::kInt64: return RangeTyped<int64_t>(ctx, a, b, c);
    default: return ctx.Error("unsupported type {}", ElemName(a.type()));
  }
}

Status EyeLikeKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.rank() != 2) return ctx.Error("input must be 2-D, got {}", x.ShapeString());
  ElemType type = x.type();
  if (ctx.node().Has("dtype")) {
    TESSERA_ASSIGN_OR_RETURN(int64_t dt, ctx.node().Int("dtype", 0));
    auto t = ElemTypeFromProto(static_cast<int32_t>(dt));
    if (!t.ok()) return ctx.Error("{}", t.status().message());
    type = *t;
  }
  if (type == ElemType::kString) return ctx.Error("output type must be numeric");
  TESSERA_ASSIGN_OR_RETURN(int64_t k, ctx.node().Int("k", 0));
  Array out(type, x.shape());
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t i = 0; i < rows; ++i) {
    if (k >= cols - i || k < -i) continue;  // column i + k outside [0, cols)
    out.SetDouble(i * cols + i + k, 1.0);
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

Status ReverseSequenceKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> lens, IntsInput(ctx, 1));
  if (x.rank() < 2) return ctx.Error("input must have rank >= 2, got {}", x.ShapeString());
  TESSERA_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.node().Int("batch_axis", 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t time_axis, ctx.node().Int("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0))) {
    return ctx.Error("batch_axis {} and time_axis {} must be 0 and 1", batch_axis, time_axis);
  }
  const size_t ba = static_cast<size_t>(batch_axis), ta = static_cast<size_t>(time_axis);
  const int64_t batch = x.dim(ba), steps = x.dim(ta);
  if (static_cast<int64_t>(lens.size()) != batch) {
    return ctx.Error("sequence_lens has {} entries for batch size {}", lens.size(), batch);
  }
  for (int64_t l : lens) {
    if (l < 0 || l > steps) return ctx.Error("sequence length {} is outside [0, {}]", l, steps);
  }
  const std::vector<int64_t> strides = Strides(x.shape());
  std::vector<int64_t> idx(static_cast<size_t>(x.numel()));
  std::vector<int64_t> pos(x.rank(), 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t t = pos[ta], len = lens[static_cast<size_t>(pos[ba])];
    const int64_t src_t = t < len ? len - 1 - t : t;
    idx[k] = static_cast<int64_t>(k) + (src_t - t) * strides[ta];
    NextIndex(pos, x.shape());
  }
  ctx.set_output(0, GatherFlat(x, x.shape(), idx));
  return Status::Ok();
}

}  // namespace tessera::onnx

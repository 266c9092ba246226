// Gathers: Gather (take along an axis), GatherElements (per-element index
// along an axis) and GatherND (index tuples into leading dims).
#include "tessera/onnx/ops/index/index_kernels.h"
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

StatusOr<int64_t> CheckIndex(const OpContext& ctx, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim) return ctx.Error("index {} is out of range for an axis of size {}", i, dim);
  return i < 0 ? i + dim : i;
}

namespace {

StatusOr<Array> IndicesInput(const OpContext& ctx, size_t i) {
  TESSERA_ASSIGN_OR_RETURN(Array a, ctx.tensor(i));
  if (a.type() != ElemType::kInt64 && a.type() != ElemType::kInt32) {
    return ctx.Error("indices must be int32 or int64, got {}", ElemName(a.type()));
  }
  return a;
}

int64_t Product(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

}  // namespace

Status GatherKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array data, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array ind, IndicesInput(ctx, 1));
  const size_t r = data.rank();
  if (r == 0) return ctx.Error("data must have rank >= 1");
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(r)));
  const size_t axis = static_cast<size_t>(axis64);
  std::vector<int64_t> shape(data.shape().begin(), data.shape().begin() + static_cast<std::ptrdiff_t>(axis));
  shape.insert(shape.end(), ind.shape().begin(), ind.shape().end());
  shape.insert(shape.end(), data.shape().begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.shape().end());
  const int64_t dim = data.dim(axis);
  const int64_t outer = Product(data.shape(), 0, axis), inner = Product(data.shape(), axis + 1, r);
  const std::vector<int64_t> idx = ind.ToInts();
  std::vector<int64_t> norm(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    TESSERA_ASSIGN_OR_RETURN(norm[j], CheckIndex(ctx, idx[j], dim));
  }
  Array out(data.type(), shape);
  const int64_t m = static_cast<int64_t>(norm.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < m; ++j) {
      CopyElems(data, (o * dim + norm[static_cast<size_t>(j)]) * inner, out, (o * m + j) * inner, inner);
    }
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ElementOffsets(const OpContext& ctx, const Array& data, const Array& ind, size_t* axis) {
  const size_t r = data.rank();
  TESSERA_ASSIGN_OR_RETURN(int64_t axis_attr, ctx.node().Int("axis", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t axis64, NormalizeAxis(ctx, axis_attr, static_cast<int64_t>(r)));
  *axis = static_cast<size_t>(axis64);
  for (size_t d = 0; d < r; ++d) {
    if (d != *axis && ind.dim(d) > data.dim(d)) {
      return ctx.Error("indices {} exceed data {} on axis {}", ind.ShapeString(), data.ShapeString(), d);
    }
  }
  const std::vector<int64_t> strides = Strides(data.shape());
  const std::vector<int64_t> idx = ind.ToInts();
  std::vector<int64_t> offsets(idx.size());
  std::vector<int64_t> pos(r, 0);
  for (size_t k = 0; k < idx.size(); ++k) {
    TESSERA_ASSIGN_OR_RETURN(int64_t i, CheckIndex(ctx, idx[k], data.dim(*axis)));
    int64_t s = 0;
    for (size_t d = 0; d < r; ++d) s += (d == *axis ? i : pos[d]) * strides[d];
    offsets[k] = s;
    NextIndex(pos, ind.shape());
  }
  return offsets;
}

Status GatherElementsKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array data, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array ind, IndicesInput(ctx, 1));
  if (data.rank() == 0 || ind.rank() != data.rank())
    return ctx.Error("data {} and indices {} need equal rank >= 1", data.ShapeString(), ind.ShapeString());
  size_t axis = 0;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> src, ElementOffsets(ctx, data, ind, &axis));
  ctx.set_output(0, GatherFlat(data, ind.shape(), src));
  return Status::Ok();
}

Status GatherNDKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array data, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array ind, IndicesInput(ctx, 1));
  TESSERA_ASSIGN_OR_RETURN(int64_t b64, ctx.node().Int("batch_dims", 0));
  const size_t r = data.rank(), q = ind.rank();
  if (r == 0 || q == 0) return ctx.Error("data and indices must have rank >= 1");
  if (b64 < 0 || b64 >= static_cast<int64_t>(std::min(r, q))) return ctx.Error("invalid batch_dims {}", b64);
  const size_t b = static_cast<size_t>(b64);
  const int64_t k64 = ind.dim(q - 1);
  if (k64 < 1 || k64 > static_cast<int64_t>(r - b)) {
    return ctx.Error("indices' last dim {} must be in [1, {}]", k64, r - b);
  }
  const size_t k = static_cast<size_t>(k64);
  for (size_t d = 0; d < b; ++d) {
    if (ind.dim(d) != data.dim(d))
      return ctx.Error("batch dims of data {} and indices {} differ", data.ShapeString(), ind.ShapeString());
  }
  std::vector<int64_t> shape(ind.shape().begin(), ind.shape().end() - 1);
  shape.insert(shape.end(), data.shape().begin() + static_cast<std::ptrdiff_t>(b + k), data.shape().end());
  const int64_t block = Product(data.shape(), b + k, r);
  const int64_t batch_stride = Product(data.shape(), b, r);
  const int64_t per_batch = Product(ind.shape(), b, q - 1);
  const int64_t tuples = Product(ind.shape(), 0, q - 1);
  const std::vector<int64_t> strides = Strides(data.shape());
  const std::vector<int64_t> idx = ind.ToInts();
  Array out(data.type(), shape);
  for (int64_t m = 0; m < tuples; ++m) {
    int64_t src = per_batch > 0 ? (m / per_batch) * batch_stride : 0;
    for (size_t j = 0; j < k; ++j) {
      TESSERA_ASSIGN_OR_RETURN(int64_t i, CheckIndex(ctx, idx[static_cast<size_t>(m) * k + j], data.dim(b + j)));
      src += i * strides[b + j];
    }
    CopyElems(data, src, out, m * block, block);
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace tessera::onnx

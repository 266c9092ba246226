#include "tessera/ops/gather/gather.h"

#include <omp.h>

#include <cstring>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"
#include "tessera/ops/embedding/embedding.h"

namespace tessera::ops {
namespace {

// Index shape [outer..., A, inner...] decomposed against a data tensor of
// the same rank: element (o, j, c) of the index maps to data offset
// outer_off[o] + idx * axis_stride + inner_off[c] (contiguous data).
struct AxisMap {
  int64_t outer = 1, span = 1, inner = 1;
  int64_t axis_size = 0, axis_stride = 0;
  std::vector<int64_t> outer_off, inner_off;
};

AxisMap MapAxis(const Shape& index_shape, const Shape& data_shape, int axis) {
  AxisMap m;
  Shape strides = ContiguousStrides(data_shape);
  const int rank = static_cast<int>(index_shape.size());
  for (int d = 0; d < axis; ++d) m.outer *= index_shape[d];
  m.span = index_shape[axis];
  for (int d = axis + 1; d < rank; ++d) m.inner *= index_shape[d];
  m.axis_size = data_shape[axis];
  m.axis_stride = strides[axis];
  auto offsets = [&](int d0, int d1, int64_t count) {
    std::vector<int64_t> off(count, 0);
    for (int64_t lin = 0; lin < count; ++lin) {
      int64_t rem = lin, o = 0;
      for (int d = d1 - 1; d >= d0; --d) {
        o += (rem % index_shape[d]) * strides[d];
        rem /= index_shape[d];
      }
      off[lin] = o;
    }
    return off;
  };
  m.outer_off = offsets(0, axis, m.outer);
  m.inner_off = offsets(axis + 1, rank, m.inner);
  return m;
}

// Validates an index tensor for gather/scatter along `axis` against `data`
// (index extent <= data extent on every other axis, values in range).
const int64_t* CheckIndex(const char* op, const Shape& data_shape, int axis, const Tensor& index, int64_t bound,
                          std::vector<int64_t>& storage) {
  TESSERA_OP_CHECK(index.defined() && detail::IsIndexType(index.dtype()),
                   "{}: index must be int64 or int32, got {}", op,
                   index.defined() ? DTypeName(index.dtype()) : std::string_view("undefined"));
  TESSERA_OP_CHECK(index.dim() == static_cast<int>(data_shape.size()),
                   "{}: index {} must have the rank of the data {}", op, ShapeString(index.shape()),
                   ShapeString(data_shape));
  for (int d = 0; d < index.dim(); ++d) {
    TESSERA_OP_CHECK(d == axis || index.size(d) <= data_shape[d],
                     "{}: index {} exceeds data {} on axis {} (only axis {} may differ)", op,
                     ShapeString(index.shape()), ShapeString(data_shape), d, axis);
  }
  const int64_t* p = detail::IndexData(index, storage);
  for (int64_t e = 0; e < index.numel(); ++e) {
    TESSERA_OP_CHECK(p[e] >= 0 && p[e] < bound, "{}: index value {} at flat position {} of index {} is outside [0, {})",
                     op, p[e], e, ShapeString(index.shape()), bound);
  }
  return p;
}

void CheckRows(const char* op, const Tensor& rows, int64_t n) {
  Tensor r = rows.Contiguous();
  std::vector<int64_t> storage;
  const int64_t* p = detail::IndexData(r, storage);
  for (int64_t i = 0; i < r.numel(); ++i) {
    TESSERA_OP_CHECK(p[i] >= 0 && p[i] < n, "{}: row {} at position {} is outside [0, {})", op, p[i], i, n);
  }
}

int CheckAxis(const char* op, int axis, int rank) {
  TESSERA_OP_CHECK(rank >= 1 && axis >= -rank && axis < rank, "{}: axis {} is out of range for rank {}", op, axis,
                   rank);
  return axis < 0 ? axis + rank : axis;
}

// out (fp32 accumulator laid out like `dst_shape`) += src at mapped places.
// Each destination sums its contributions in increasing index-element
// order, so the result is bitwise independent of the thread count.
template <typename S>
void ScatterAccumulate(float* acc, const AxisMap& dst, const S* src, const AxisMap& src_map, const int64_t* idx) {
  const int64_t outer = dst.outer, span = dst.span, inner = dst.inner;
  if (UseReference()) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < span; ++j) {
        for (int64_t c = 0; c < inner; ++c) {
          int64_t e = (o * span + j) * inner + c;
          acc[dst.outer_off[o] + idx[e] * dst.axis_stride + dst.inner_off[c]] +=
              ToF32(src[src_map.outer_off[o] + j * src_map.axis_stride + src_map.inner_off[c]]);
        }
      }
    }
    return;
  }
  // Tasks are (outer, inner chunk) pairs: their destinations are disjoint.
  const int64_t chunk = std::max<int64_t>(64, inner / 8);
  const int64_t chunks = (inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (outer * span * inner > 4 * detail::kParallelGrain)
  for (int64_t task = 0; task < outer * chunks; ++task) {
    const int64_t o = task / chunks, c0 = (task % chunks) * chunk, c1 = std::min(inner, c0 + chunk);
    for (int64_t j = 0; j < span; ++j) {
      const int64_t* row_idx = idx + (o * span + j) * inner;
      const S* s = src + src_map.outer_off[o] + j * src_map.axis_stride;
      float* a = acc + dst.outer_off[o];
      for (int64_t c = c0; c < c1; ++c) a[row_idx[c] * dst.axis_stride + dst.inner_off[c]] += ToF32(s[src_map.inner_off[c]]);
    }
  }
}

}  // namespace

Tensor Gather(const Tensor& x_in, int axis, const Tensor& index_in) {
  TESSERA_OP_CHECK(x_in.defined(), "gather: input is undefined");
  axis = CheckAxis("gather", axis, x_in.dim());
  Tensor x = x_in.Contiguous();
  Tensor index = index_in.defined() ? index_in.Contiguous() : index_in;
  std::vector<int64_t> storage;
  const int64_t* idx = CheckIndex("gather", x.shape(), axis, index, x.size(axis), storage);
  Tensor out = Tensor::Empty(index.shape(), x.dtype());
  AxisMap m = MapAxis(index.shape(), x.shape(), axis);
  const size_t es = DTypeSize(x.dtype());
  if (UseReference()) {
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t o = 0; o < m.outer; ++o) {
      for (int64_t j = 0; j < m.span; ++j) {
        for (int64_t c = 0; c < m.inner; ++c) {
          int64_t e = (o * m.span + j) * m.inner + c;
          const char* from = src + (m.outer_off[o] + idx[e] * m.axis_stride + m.inner_off[c]) * es;
          for (size_t b = 0; b < es; ++b) dst[e * es + b] = from[b];
        }
      }
    }
    return out;
  }
  // Typed copies by element size (2, 4 or 8 bytes).
  auto run = [&]<typename E>() {
    const E* src = static_cast<const E*>(x.raw_data());
    E* dst = static_cast<E*>(out.raw_data());
#pragma omp parallel for schedule(static) if (index.numel() > 4 * detail::kParallelGrain && m.outer > 1)
    for (int64_t o = 0; o < m.outer; ++o) {
      const E* base = src + m.outer_off[o];
      for (int64_t j = 0; j < m.span; ++j) {
        const int64_t e0 = (o * m.span + j) * m.inner;
        const int64_t* row_idx = idx + e0;
        if (m.inner == 1) {
          dst[e0] = base[row_idx[0] * m.axis_stride];
        } else {
          for (int64_t c = 0; c < m.inner; ++c) dst[e0 + c] = base[row_idx[c] * m.axis_stride + m.inner_off[c]];
        }
      }
    }
  };
  switch (es) {
    case 2: run.operator()<uint16_t>(); break;
    case 4: run.operator()<uint32_t>(); break;
    default: run.operator()<uint64_t>(); break;
  }
  return out;
}

Tensor ScatterAdd(const Tensor& base_in, int axis, const Tensor& index_in, const Tensor& src_in) {
  TESSERA_OP_CHECK(base_in.defined() && src_in.defined() && IsFloating(base_in.dtype()) &&
                       IsFloating(src_in.dtype()),
                   "scatter_add: base and src must be floating tensors");
  axis = CheckAxis("scatter_add", axis, base_in.dim());
  TESSERA_OP_CHECK(src_in.dim() == base_in.dim(), "scatter_add: src {} must have the rank of base {}",
                   ShapeString(src_in.shape()), ShapeString(base_in.shape()));
  Tensor base = base_in.Contiguous();
  Tensor src = src_in.Contiguous();
  Tensor index = index_in.defined() ? index_in.Contiguous() : index_in;
  std::vector<int64_t> storage;
  const int64_t* idx = CheckIndex("scatter_add", base.shape(), axis, index, base.size(axis), storage);
  for (int d = 0; d < index.dim(); ++d) {
    TESSERA_OP_CHECK(index.size(d) <= src.size(d), "scatter_add: index {} exceeds src {} on axis {}",
                     ShapeString(index.shape()), ShapeString(src.shape()), d);
  }
  AxisMap dst_map = MapAxis(index.shape(), base.shape(), axis);
  AxisMap src_map = MapAxis(index.shape(), src.shape(), axis);
  Tensor acc = base.dtype() == DType::kF32 ? base.Clone() : base.To(DType::kF32);
  DispatchFloating(src.dtype(), [&]<typename S>() {
    ScatterAccumulate(acc.data<float>(), dst_map, src.data<S>(), src_map, idx);
  });
  return acc.To(base.dtype());
}

Tensor GatherBackward(const Tensor& grad_out, int axis, const Tensor& index, const Shape& input_shape) {
  TESSERA_OP_CHECK(grad_out.defined() && IsFloating(grad_out.dtype()) && index.defined() &&
                       grad_out.shape() == index.shape(),
                   "gather backward: grad_out must be floating with the index shape {}, got {}",
                   index.defined() ? ShapeString(index.shape()) : std::string("undefined"),
                   grad_out.defined() ? ShapeString(grad_out.shape()) : std::string("undefined"));
  return ScatterAdd(Tensor::Zeros(input_shape, grad_out.dtype()), axis, index, grad_out);
}

Tensor ScatterAddBackwardSrc(const Tensor& grad_out, int axis, const Tensor& index) {
  return Gather(grad_out, axis, index);
}

Tensor GatherRows(const Tensor& x, const Tensor& rows) {
  TESSERA_OP_CHECK(x.defined() && x.dim() == 2, "gather_rows: x must be [N, D], got {}",
                   x.defined() ? ShapeString(x.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(rows.defined() && rows.dim() == 1 && detail::IsIndexType(rows.dtype()),
                   "gather_rows: rows must be an int64 [M] tensor, got {}",
                   rows.defined() ? ShapeString(rows.shape()) : std::string("undefined"));
  CheckRows("gather_rows", rows, x.size(0));
  return Embedding(x, rows);
}

Tensor ScatterAddRows(const Tensor& src, const Tensor& rows, int64_t n) {
  TESSERA_OP_CHECK(src.defined() && src.dim() == 2 && IsFloating(src.dtype()),
                   "scatter_add_rows: src must be a floating [M, D] tensor, got {}",
                   src.defined() ? ShapeString(src.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(rows.defined() && rows.dim() == 1 && detail::IsIndexType(rows.dtype()) &&
                       rows.size(0) == src.size(0),
                   "scatter_add_rows: rows must be int64 [{}] (src {}), got {}", src.size(0), ShapeString(src.shape()),
                   rows.defined() ? ShapeString(rows.shape()) : std::string("undefined"));
  TESSERA_OP_CHECK(n >= 0, "scatter_add_rows: n = {} must be >= 0", n);
  CheckRows("scatter_add_rows", rows, n);
  return EmbeddingBackward(src, rows, {n, src.size(1)}, src.dtype());
}

}  // namespace tessera::ops

// Scatters: ScatterElements (and the deprecated Scatter) and ScatterND, with
// the reductions none / add / mul / max / min (integer add and mul wrap).
#include <algorithm>
#include <type_traits>

#include "tessera/onnx/ops/index/index_kernels.h"
#include "tessera/onnx/ops/kernel_util.h"
#include "tessera/onnx/ops/shape/shape_util.h"

namespace tessera::onnx {

namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ReadReduction(const OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(std::string s, ctx.node().String("reduction", "none"));
  if (s == "none") return Reduction::kNone;
  if (s == "add") return Reduction::kAdd;
  if (s == "mul") return Reduction::kMul;
  if (s == "max") return Reduction::kMax;
  if (s == "min") return Reduction::kMin;
  return ctx.Error("unknown reduction '{}'", s);
}

template <typename T>
T Combine(T a, T b, Reduction red) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (red) {
      case Reduction::kAdd:
      case Reduction::kMax: return a || b;
      case Reduction::kMul:
      case Reduction::kMin: return a && b;
      default: return b;
    }
  } else if constexpr (std::is_integral_v<T>) {
    // Unsigned and at least 32 bits wide, so that the product cannot overflow a promoted int.
    using U = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
    switch (red) {
      case Reduction::kAdd: return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case Reduction::kMul: return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case Reduction::kMax: return std::max(a, b);
      case Reduction::kMin: return std::min(a, b);
      default: return b;
    }
  } else {
    const double x = ToDouble(a), y = ToDouble(b);
    switch (red) {
      case Reduction::kAdd: return FromDouble<T>(x + y);
      case Reduction::kMul: return FromDouble<T>(x * y);
      case Reduction::kMax: return FromDouble<T>(std::max(x, y));
      case Reduction::kMin: return FromDouble<T>(std::min(x, y));
      default: return b;
    }
  }
}

// out[dst[k] ... dst[k]+block) (op)= updates[k*block ...) for each k, in order.
Status Apply(const OpContext& ctx, Array& out, const Array& updates, const std::vector<int64_t>& dst, int64_t block,
             Reduction red) {
  if (red == Reduction::kNone) {
    for (size_t k = 0; k < dst.size(); ++k) CopyElems(updates, static_cast<int64_t>(k) * block, out, dst[k], block);
    return Status::Ok();
  }
  if (out.type() == ElemType::kString) return ctx.Error("reductions do not apply to strings");
  return VisitNumeric(out.type(), "Scatter", [&](auto t) {
    using T = decltype(t);
    T* o = out.data<T>();
    const T* u = updates.data<T>();
    for (size_t k = 0; k < dst.size(); ++k) {
      for (int64_t j = 0; j < block; ++j) {
        o[dst[k] + j] = Combine<T>(o[dst[k] + j], u[static_cast<int64_t>(k) * block + j], red);
      }
    }
  });
}

StatusOr<Array> Inputs(const OpContext& ctx, Array& data, Array& ind, Array& upd) {
  TESSERA_ASSIGN_OR_RETURN(data, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(ind, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(upd, ctx.tensor(2));
  if (ind.type() != ElemType::kInt64 && ind.type() != ElemType::kInt32) {
    return ctx.Error("indices must be int32 or int64, got {}", ElemName(ind.type()));
  }
  if (upd.type() != data.type())
    return ctx.Error("updates are {}, data {}", ElemName(upd.type()), ElemName(data.type()));
  return data.Clone();
}

}  // namespace

Status ScatterElementsKernel(OpContext& ctx) {
  Array data, ind, upd;
  TESSERA_ASSIGN_OR_RETURN(Array out, Inputs(ctx, data, ind, upd));
  TESSERA_ASSIGN_OR_RETURN(Reduction red, ReadReduction(ctx));
  const size_t r = data.rank();
  if (r == 0 || ind.rank() != r || ind.shape() != upd.shape()) {
    return ctx.Error("data {}, indices {} and updates {} need equal rank >= 1 (indices and updates equal shape)",
                     data.ShapeString(), ind.ShapeString(), upd.ShapeString());
  }
  size_t axis = 0;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int64_t> dst, ElementOffsets(ctx, data, ind, &axis));
  TESSERA_RETURN_IF_ERROR(Apply(ctx, out, upd, dst, 1, red));
  ctx.set_output(0, out);
  return Status::Ok();
}

Status ScatterNDKernel(OpContext& ctx) {
  Array data, ind, upd;
  TESSERA_ASSIGN_OR_RETURN(Array out, Inputs(ctx, data, ind, upd));
  TESSERA_ASSIGN_OR_RETURN(Reduction red, ReadReduction(ctx));
  const size_t r = data.rank(), q = ind.rank();
  if (r == 0 || q == 0) return ctx.Error("data and indices must have rank >= 1");
  const int64_t k64 = ind.dim(q - 1);
  if (k64 < 0 || k64 > static_cast<int64_t>(r)) return ctx.Error("indices' last dim {} exceeds rank {}", k64, r);
  const size_t k = static_cast<size_t>(k64);
  std::vector<int64_t> ushape(ind.shape().begin(), ind.shape().end() - 1);
  ushape.insert(ushape.end(), data.shape().begin() + static_cast<std::ptrdiff_t>(k), data.shape().end());
  if (upd.shape() != ushape) {
    return ctx.Error("updates have shape {}, expected [{}]", upd.ShapeString(), fmt::join(ushape, ","));
  }
  int64_t block = 1;
  for (size_t d = k; d < r; ++d) block *= data.dim(d);
  const std::vector<int64_t> strides = Strides(data.shape());
  const std::vector<int64_t> idx = ind.ToInts();
  const size_t tuples = static_cast<size_t>(Numel({ind.shape().begin(), ind.shape().end() - 1}));
  std::vector<int64_t> dst(tuples);
  for (size_t m = 0; m < tuples; ++m) {
    int64_t s = 0;
    for (size_t j = 0; j < k; ++j) {
      TESSERA_ASSIGN_OR_RETURN(int64_t i, CheckIndex(ctx, idx[m * k + j], data.dim(j)));
      s += i * strides[j];
    }
    dst[m] = s;
  }
  TESSERA_RETURN_IF_ERROR(Apply(ctx, out, upd, dst, block, red));
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace tessera::onnx

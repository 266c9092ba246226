// ReduceSum / Mean / Prod / Max / Min / L1 / L2 / SumSquare / LogSum /
// LogSumExp over any set of axes. Floating types accumulate in double;
// integer sums and products wrap like numpy (computed on uint64), integer
// Max / Min compare exactly, and the transcendental reductions of integers go
// through double and saturate back. Empty reductions give each op's identity
// (0, 1, -inf, +inf or the integer type's lowest / highest).
#include <cmath>
#include <limits>
#include <vector>

#include "tessera/onnx/ops/reduce/kernels.h"
#include "tessera/onnx/ops/reduce/reduce_util.h"

namespace tessera::onnx {
namespace {

enum class Reduction { kSum, kMean, kProd, kMax, kMin, kL1, kL2, kSumSquare, kLogSum, kLogSumExp };

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every reduction in double: returns one value per output element.
template <typename T>
std::vector<double> ReduceInDouble(const Array& x, const ReducePlan& p, Reduction r) {
  const T* in = x.data<T>();
  const int64_t n = x.numel();
  const std::vector<int64_t>& o = p.out_index;
  double init = 0;
  if (r == Reduction::kProd) init = 1;
  if (r == Reduction::kMax || r == Reduction::kLogSumExp) init = -kInf;
  if (r == Reduction::kMin) init = kInf;
  std::vector<double> acc(static_cast<size_t>(p.out_numel), init);
  for (int64_t i = 0; i < n; ++i) {
    const double v = ToDouble(in[i]);
    double& a = acc[static_cast<size_t>(o[static_cast<size_t>(i)])];
    switch (r) {
      case Reduction::kSum:
      case Reduction::kMean:
      case Reduction::kLogSum: a += v; break;
      case Reduction::kProd: a *= v; break;
      case Reduction::kMax:
      case Reduction::kLogSumExp:
        if (std::isnan(v) || v > a) a = v;
        break;
      case Reduction::kMin:
        if (std::isnan(v) || v < a) a = v;
        break;
      case Reduction::kL1: a += std::fabs(v); break;
      case Reduction::kL2:
      case Reduction::kSumSquare: a += v * v; break;
    }
  }
  switch (r) {
    case Reduction::kMean:
      for (double& a : acc) a = p.group > 0 ? a / static_cast<double>(p.group) : std::nan("");
      break;
    case Reduction::kL2:
      for (double& a : acc) a = std::sqrt(a);
      break;
    case Reduction::kLogSum:
      for (double& a : acc) a = std::log(a);
      break;
    case Reduction::kLogSumExp: {
      // acc holds each group's max; sum exp(v - max) in a second pass.
      std::vector<double> sum(acc.size(), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(o[static_cast<size_t>(i)]);
        if (std::isfinite(acc[k])) sum[k] += std::exp(ToDouble(in[i]) - acc[k]);
      }
      for (size_t k = 0; k < acc.size(); ++k) {
        if (std::isfinite(acc[k])) acc[k] += std::log(sum[k]);
      }
      break;
    }
    default: break;
  }
  return acc;
}

// Sum / Mean / Prod / L1 / SumSquare / Max / Min of integers, exactly (sums
// and products wrap modulo 2^bits like numpy's fixed-width arithmetic).
template <typename T>
void ReduceIntegerExact(const Array& x, const ReducePlan& p, Reduction r, T* out) {
  const T* in = x.data<T>();
  const int64_t n = x.numel();
  const std::vector<int64_t>& o = p.out_index;
  const size_t m = static_cast<size_t>(p.out_numel);
  if (r == Reduction::kMax || r == Reduction::kMin) {
    const bool is_max = r == Reduction::kMax;
    for (size_t k = 0; k < m; ++k) out[k] = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    for (int64_t i = 0; i < n; ++i) {
      T& a = out[o[static_cast<size_t>(i)]];
      if (is_max ? in[i] > a : in[i] < a) a = in[i];
    }
    return;
  }
  std::vector<uint64_t> acc(m, r == Reduction::kProd ? 1 : 0);
  for (int64_t i = 0; i < n; ++i) {
    // Sign-extended to 64 bits, then modular arithmetic on uint64.
    const uint64_t v =
        static_cast<uint64_t>(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(in[i]));
    uint64_t& a = acc[static_cast<size_t>(o[static_cast<size_t>(i)])];
    switch (r) {
      case Reduction::kProd: a *= v; break;
      case Reduction::kL1: a += (std::is_signed_v<T> && in[i] < 0) ? uint64_t{0} - v : v; break;
      case Reduction::kSumSquare: a += v * v; break;
      default: a += v; break;
    }
  }
  for (size_t k = 0; k < m; ++k) {
    if (r == Reduction::kMean) {
      if (p.group == 0) {
        out[k] = T{0};
      } else if constexpr (std::is_signed_v<T>) {
        out[k] = static_cast<T>(static_cast<int64_t>(acc[k]) / p.group);
      } else {
        out[k] = static_cast<T>(acc[k] / static_cast<uint64_t>(p.group));
      }
    } else {
      out[k] = static_cast<T>(acc[k]);
    }
  }
}

Status RunReduce(OpContext& ctx, Reduction r, int64_t axes_input_opset) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() == ElemType::kBool || x.type() == ElemType::kString) {
    return ctx.Error("element type {} is not supported", ElemName(x.type()));
  }
  TESSERA_ASSIGN_OR_RETURN(ReducePlan plan, MakeReducePlan(ctx, x, ctx.opset() >= axes_input_opset));
  if (plan.noop) {
    ctx.set_output(0, x);
    return Status::Ok();
  }
  Array out(x.type(), plan.out_shape);
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), ctx.node().op_type, [&](auto t) {
    using T = decltype(t);
    if constexpr (!std::is_same_v<T, bool>) {
      T* po = out.data<T>();
      if constexpr (!kIsFloatLike<T>) {
        if (r != Reduction::kL2 && r != Reduction::kLogSum && r != Reduction::kLogSumExp) {
          ReduceIntegerExact<T>(x, plan, r, po);
          return;
        }
      }
      const std::vector<double> acc = ReduceInDouble<T>(x, plan, r);
      for (size_t k = 0; k < acc.size(); ++k) po[k] = SaturatingFromDouble<T>(acc[k]);
    }
  }));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

// ReduceSum takes `axes` as an input from opset 13, the others from 18.
constexpr int64_t kSumAxesInputOpset = 13;
constexpr int64_t kAxesInputOpset = 18;

}  // namespace

Status ReduceSumKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kSum, kSumAxesInputOpset); }
Status ReduceMeanKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kMean, kAxesInputOpset); }
Status ReduceProdKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kProd, kAxesInputOpset); }
Status ReduceMaxKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kMax, kAxesInputOpset); }
Status ReduceMinKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kMin, kAxesInputOpset); }
Status ReduceL1Kernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kL1, kAxesInputOpset); }
Status ReduceL2Kernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kL2, kAxesInputOpset); }
Status ReduceSumSquareKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kSumSquare, kAxesInputOpset); }
Status ReduceLogSumKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kLogSum, kAxesInputOpset); }
Status ReduceLogSumExpKernel(OpContext& ctx) { return RunReduce(ctx, Reduction::kLogSumExp, kAxesInputOpset); }

}  // namespace tessera::onnx

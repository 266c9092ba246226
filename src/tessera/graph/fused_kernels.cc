#include "tessera/graph/fused_kernels.h"

#include "tessera/ops/matmul/gemm.h"

namespace tessera::graph {
namespace {

constexpr int kMid = -2;  // b's input that is a's output

// Linear(x, w[, bias]) + r in one fp32 GEMM with a bias + residual epilogue;
// nothing when the operands are not fp32 contiguous.
std::optional<Tensor> LinearResidual(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& r) {
  if (x.dtype() != DType::kF32 || w.dtype() != DType::kF32 || r.dtype() != DType::kF32) return std::nullopt;
  if (bias.defined() && (bias.dtype() != DType::kF32 || !bias.is_contiguous())) return std::nullopt;
  if (!x.is_contiguous() || !w.is_contiguous() || !r.is_contiguous() || w.dim() != 2) return std::nullopt;
  const int64_t k = w.size(1), n = w.size(0);
  if (x.size(-1) != k) return std::nullopt;
  Shape out_shape = x.shape();
  out_shape.back() = n;
  if (r.shape() != out_shape) return std::nullopt;
  const int64_t m = x.numel() / k;
  Tensor y = Tensor::Empty(out_shape, DType::kF32);
  ops::GemmEpilogue epi;
  epi.bias = bias.defined() ? bias.data<float>() : nullptr;
  epi.residual = r.data<float>();
  epi.ldr = n;
  ops::GemmF32(false, true, m, n, k, 1.0f, x.data<float>(), k, w.data<float>(), k, 0.0f, y.data<float>(), n, epi);
  return y;
}

}  // namespace

std::optional<Node> FuseNodes(const Graph& g, const Node& a, const Node& b, int v) {
  if (a.outputs.size() != 1) return std::nullopt;
  Node f;
  f.kind = a.kind == OpKind::kOutFusable ? OpKind::kOutFusable : OpKind::kElementwise;
  f.outputs = b.outputs;
  f.visible = b.visible;
  f.inputs = a.inputs;
  std::vector<int> b_map;
  for (int in : b.inputs) {
    if (in == v) {
      b_map.push_back(kMid);
      continue;
    }
    b_map.push_back(static_cast<int>(f.inputs.size()));
    f.inputs.push_back(in);
  }
  f.fused = a.fused.empty() ? std::vector<std::string>{a.op} : a.fused;
  if (b.fused.empty()) {
    f.fused.push_back(b.op);
  } else {
    f.fused.insert(f.fused.end(), b.fused.begin(), b.fused.end());
  }
  f.op = "Fused";
  for (const std::string& s : f.fused) f.op += "_" + s;
  f.attrs = a.attrs + (a.attrs.empty() || b.attrs.empty() ? "" : "; ") + b.attrs;
  const size_t na = a.inputs.size();
  const bool linear_add =
      a.op == "Linear" && a.fused.empty() && b.op == "Add" && b.fused.empty() && g.values[v].dtype == DType::kF32;
  ForwardFn sequential = [ra = a.run, rb = b.run, na, b_map](const std::vector<Tensor>& in) {
    std::vector<Tensor> ai(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(na));
    Tensor mid = ra(ai)[0];
    std::vector<Tensor> bi;
    bi.reserve(b_map.size());
    for (int m : b_map) bi.push_back(m == kMid ? mid : in[m]);
    return rb(bi);
  };
  if (linear_add) {
    const bool has_bias = na == 3;
    const int r_index = b_map[0] == kMid ? b_map[1] : b_map[0];
    f.run = [sequential, has_bias, r_index](const std::vector<Tensor>& in) {
      std::optional<Tensor> y = LinearResidual(in[0], in[1], has_bias ? in[2] : Tensor(), in[r_index]);
      return y ? std::vector<Tensor>{*y} : sequential(in);
    };
  } else {
    f.run = sequential;
  }
  return f;
}

}  // namespace tessera::graph

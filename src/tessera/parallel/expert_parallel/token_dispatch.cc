#include "tessera/parallel/expert_parallel/token_dispatch.h"

#include "tessera/base/error.h"
#include "tessera/graph/tape.h"
#include "tessera/parallel/tensor_parallel/collectives.h"

namespace tessera::parallel {
namespace {

using comm::moe::DispatchHandle;
using comm::moe::MoeBuffer;
using comm::moe::Payload;

Payload Exact(DType dtype) { return ExactPayload(dtype); }

void CheckActivations(const Tensor& x, int64_t hidden, const char* what) {
  TESSERA_OP_CHECK(x.defined() && x.dim() == 2 && x.size(1) == hidden &&
                       (x.dtype() == DType::kF32 || x.dtype() == DType::kBF16 || x.dtype() == DType::kF16),
                   "{}: expected an fp32, bf16 or fp16 [rows, {}] tensor, got {}", what, hidden,
                   x.defined() ? ShapeString(x.shape()) + " " + std::string(DTypeName(x.dtype())) : "undefined");
}

// Dispatch of rows x [N, d] along h (also the backward of combine).
Tensor DispatchRows(MoeBuffer& buf, const DispatchHandle& h, const Tensor& x, Payload payload) {
  Tensor xs = x.Contiguous();
  Tensor rows = Tensor::Empty({h.num_recv_rows(), buf.hidden()}, x.dtype());
  ThrowIfFailed(buf.Dispatch(h, xs.raw_data(), CommDataType(x.dtype()), payload, rows.raw_data()), "MoE dispatch");
  return rows;
}

// Combine of y [R, d] with per-row `weights`, or (weights null) with the
// dispatch's gates (`gates`) or 1 (the backward of dispatch).
Tensor CombineRows(MoeBuffer& buf, const DispatchHandle& h, const Tensor& y, const float* weights, bool gates) {
  Tensor ys = y.Contiguous();
  Tensor out = Tensor::Empty({h.num_tokens, buf.hidden()}, y.dtype());
  const comm::DataType dt = CommDataType(y.dtype());
  ThrowIfFailed(weights != nullptr ? buf.Combine(h, ys.raw_data(), dt, weights, Exact(y.dtype()), out.raw_data())
                                   : buf.CombineGated(h, ys.raw_data(), dt, gates, Exact(y.dtype()), out.raw_data()),
                "MoE combine");
  return out;
}

}  // namespace

Payload ExactPayload(DType dtype) {
  return dtype == DType::kBF16 ? Payload::kBFloat16 : dtype == DType::kF16 ? Payload::kFloat16 : Payload::kFloat32;
}

DispatchedTokens DispatchTokens(MoeBuffer& buf, const Tensor& x, const std::vector<int64_t>& topk_idx,
                                const Tensor& gates, Payload payload) {
  CheckActivations(x, buf.hidden(), "DispatchTokens x");
  const int64_t n = x.size(0);
  TESSERA_OP_CHECK(gates.defined() && gates.dim() == 2 && gates.size(0) == n &&
                       static_cast<size_t>(gates.numel()) == topk_idx.size(),
                   "DispatchTokens: gates must be [{}, k] matching topk_idx ({} entries), got {}", n, topk_idx.size(),
                   gates.defined() ? ShapeString(gates.shape()) : std::string("undefined"));
  const int k = static_cast<int>(gates.size(1));
  TESSERA_OP_CHECK(payload != Payload::kFloat32 || x.dtype() == DType::kF32,
                   "DispatchTokens: an fp32 payload needs fp32 activations, got {}", DTypeName(x.dtype()));
  const std::vector<float> gate_values = gates.To(DType::kF32).Contiguous().ToFloatVector();
  auto handle = buf.Layout(topk_idx, k, gate_values);
  ThrowIfFailed(handle.status(), "MoE layout");
  std::shared_ptr<const DispatchHandle> h = *handle;

  DispatchedTokens d;
  d.handle = h;
  d.rows = DispatchRows(buf, *h, x, payload);
  d.weights = Tensor::FromVector(h->row_weights, {h->num_recv_rows()});
  // Direct Record calls, not graph::Apply, on purpose (they make graph
  // capture fall back to eager, as the host read of the gates above already
  // does):
  //  - they must be recorded whenever grad mode is on, even when no input
  //    requires grad, so that every rank joins the backward exchanges
  //    (token_dispatch.h); Apply records only when an input requires grad;
  //  - forward and backward depend on the routing handle `h` (built by
  //    Layout from topk_idx and the gate values read on the host), per-call
  //    state that is not a tensor, so a replay could not recompute them
  //    from its inputs.
  if (graph::GradEnabled()) {
    MoeBuffer* b = &buf;
    graph::Record("MoeDispatch", {x}, {d.rows}, [b, h](const std::vector<Tensor>& g, const std::vector<bool>&) {
      return std::vector<Tensor>{CombineRows(*b, *h, g[0], nullptr, /*gates=*/false)};
    });
    const DType gate_dtype = gates.dtype();
    graph::Record("MoeDispatchWeights", {gates}, {d.weights},
                  [b, h, n, k, gate_dtype](const std::vector<Tensor>& g, const std::vector<bool>&) {
                    Tensor per_row = g[0].To(DType::kF32).Contiguous();
                    Tensor out = Tensor::Empty({n, k}, DType::kF32);
                    ThrowIfFailed(b->ReturnScalars(*h, per_row.data<float>(), out.data<float>()), "MoE gate gradients");
                    return std::vector<Tensor>{out.To(gate_dtype)};
                  });
  }
  return d;
}

Tensor CombineTokens(MoeBuffer& buf, const DispatchedTokens& dispatched, const Tensor& y, const Tensor& weights) {
  const std::shared_ptr<const DispatchHandle> h = dispatched.handle;
  TESSERA_OP_CHECK(h != nullptr, "CombineTokens: no dispatch handle");
  CheckActivations(y, buf.hidden(), "CombineTokens y");
  TESSERA_OP_CHECK(y.size(0) == h->num_recv_rows() && weights.defined() && weights.dim() == 1 &&
                       weights.size(0) == h->num_recv_rows(),
                   "CombineTokens: y has {} rows and weights {}, the dispatch delivered {}", y.size(0),
                   weights.defined() ? ShapeString(weights.shape()) : std::string("undefined"), h->num_recv_rows());
  Tensor w = weights.To(DType::kF32).Contiguous();
  // The dispatch's own weights tensor (the usual case; the same program on
  // every rank, so the choice is collective): the buffer applies the gates
  // where the tokens live, which lets the same-host path pull expert rows
  // and weight them there (no expert-side pass).
  const bool gated = weights.impl() == dispatched.weights.impl();
  Tensor out = CombineRows(buf, *h, y, gated ? nullptr : w.data<float>(), gated);
  // A direct Record, not graph::Apply, for the reasons given in
  // DispatchTokens (recorded whenever grad mode is on; the routing handle is
  // per-call state, not a tensor).
  if (graph::GradEnabled()) {
    MoeBuffer* b = &buf;
    const DType wdtype = weights.dtype();
    graph::Record("MoeCombine", {y, weights}, {out},
                  [b, h, y, w, wdtype](const std::vector<Tensor>& g, const std::vector<bool>& needs) {
                    Tensor grows = DispatchRows(*b, *h, g[0], Exact(g[0].dtype()));
                    const int64_t rows = h->num_recv_rows(), d = b->hidden();
                    const std::vector<float> gv = grows.ToFloatVector();
                    const std::vector<float> yv = y.Contiguous().ToFloatVector();
                    const float* wv = w.data<float>();
                    std::vector<Tensor> result(2);
                    if (needs[0]) {
                      std::vector<float> gy(gv.size());
                      for (int64_t r = 0; r < rows; ++r) {
                        for (int64_t c = 0; c < d; ++c) gy[r * d + c] = wv[r] * gv[r * d + c];
                      }
                      result[0] = Tensor::FromVector(gy, {rows, d}, y.dtype());
                    }
                    if (needs[1]) {
                      std::vector<float> gw(static_cast<size_t>(rows));
                      for (int64_t r = 0; r < rows; ++r) {
                        double acc = 0;
                        for (int64_t c = 0; c < d; ++c) acc += static_cast<double>(gv[r * d + c]) * yv[r * d + c];
                        gw[r] = static_cast<float>(acc);
                      }
                      result[1] = Tensor::FromVector(gw, {rows}, wdtype);
                    }
                    return result;
                  });
  }
  return out;
}

}  // namespace tessera::parallel

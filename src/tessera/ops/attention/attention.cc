// Causal attention front end: validates arguments, picks the reference or
// the flash kernels (AVX-512 when the CPU has it, else AVX2).
#include "tessera/ops/attention/attention.h"

#include <atomic>

#include "tessera/base/error.h"
#include "tessera/base/logging.h"
#include "tessera/ops/attention/attention_internal.h"
#include "tessera/ops/attention/kernel_util.h"
#include "tessera/ops/common/impl.h"

namespace tessera::ops {
namespace {

using attention_internal::Dims;

std::string Describe(const Tensor& t) {
  if (!t.defined()) return "undefined";
  return fmt::format("{} {}", DTypeName(t.dtype()), ShapeString(t.shape()));
}

Dims Validate(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  TESSERA_OP_CHECK(q.defined() && q.dim() == 4 && IsFloating(q.dtype()),
                   "{}: q must be a floating [B, H, T, Dh] tensor, got {}", op, Describe(q));
  TESSERA_OP_CHECK(k.defined() && v.defined() && k.shape() == q.shape() && v.shape() == q.shape() &&
                       k.dtype() == q.dtype() && v.dtype() == q.dtype(),
                   "{}: q, k, v must share shape and dtype, got q {}, k {}, v {}", op, Describe(q), Describe(k),
                   Describe(v));
  TESSERA_OP_CHECK(q.size(3) > 0, "{}: head dim must be positive, got q {}", op, Describe(q));
  return Dims{q.size(0) * q.size(1), q.size(2), q.size(3)};
}

const attention_internal::FlashKernels& Flash() {
  const attention_internal::FlashKernels& chosen =
      detail::UseAvx512() ? attention_internal::FlashAvx512() : attention_internal::FlashAvx2();
  static std::atomic<const char*> logged{nullptr};
  if (logged.exchange(chosen.name, std::memory_order_relaxed) != chosen.name) {
    TLOG(INFO, "causal_attention: using {}", chosen.name);
  }
  return chosen;
}

}  // namespace

AttentionResult CausalAttention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale) {
  Dims d = Validate("causal_attention", q_in, k_in, v_in);
  Tensor q = q_in.Contiguous(), k = k_in.Contiguous(), v = v_in.Contiguous();
  AttentionResult r;
  r.out = Tensor::Empty(q.shape(), q.dtype());
  r.lse = Tensor::Empty({q.size(0), q.size(1), q.size(2)}, DType::kF32);
  if (d.bh * d.t == 0) return r;
  if (UseReference()) {
    attention_internal::ReferenceForward(q, k, v, scale, d, r.out, r.lse);
  } else {
    Flash().forward(q, k, v, scale, d, r.out, r.lse);
  }
  return r;
}

AttentionGrads CausalAttentionBackward(const Tensor& grad_out, const Tensor& q_in, const Tensor& k_in,
                                       const Tensor& v_in, const AttentionResult& fwd, float scale) {
  const char* op = "causal_attention backward";
  Dims d = Validate(op, q_in, k_in, v_in);
  TESSERA_OP_CHECK(grad_out.defined() && IsFloating(grad_out.dtype()) && grad_out.shape() == q_in.shape(),
                   "{}: grad_out must be floating with q's shape, got grad_out {}, q {}", op, Describe(grad_out),
                   Describe(q_in));
  TESSERA_OP_CHECK(fwd.out.defined() && IsFloating(fwd.out.dtype()) && fwd.out.shape() == q_in.shape(),
                   "{}: forward out must have q's shape, got {}, q {}", op, Describe(fwd.out), Describe(q_in));
  Shape lse_shape = {q_in.size(0), q_in.size(1), q_in.size(2)};
  TESSERA_OP_CHECK(fwd.lse.defined() && fwd.lse.dtype() == DType::kF32 && fwd.lse.shape() == lse_shape,
                   "{}: forward lse must be fp32 {}, got {}", op, ShapeString(lse_shape), Describe(fwd.lse));
  Tensor q = q_in.Contiguous(), k = k_in.Contiguous(), v = v_in.Contiguous();
  Tensor dout = grad_out.To(q.dtype()).Contiguous();
  Tensor out = fwd.out.To(q.dtype()).Contiguous();
  Tensor lse = fwd.lse.Contiguous();
  AttentionGrads g;
  g.grad_q = Tensor::Empty(q.shape(), q.dtype());
  g.grad_k = Tensor::Empty(q.shape(), q.dtype());
  g.grad_v = Tensor::Empty(q.shape(), q.dtype());
  if (d.bh * d.t == 0) return g;
  if (UseReference()) {
    attention_internal::ReferenceBackward(dout, q, k, v, out, lse, scale, d, g.grad_q, g.grad_k, g.grad_v);
  } else {
    Flash().backward(dout, q, k, v, out, lse, scale, d, g.grad_q, g.grad_k, g.grad_v);
  }
  return g;
}

}  // namespace tessera::ops

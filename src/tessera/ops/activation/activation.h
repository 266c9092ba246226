// Activations, forward and backward (backward takes the forward input).
//   gelu:   tanh approximation 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
//   silu:   x·σ(x)
//   swiglu: silu(gate) · up   (gate, up same shape)
//   relu
#pragma once

#include "tessera/tensor/tensor.h"

namespace tessera::ops {

Tensor Gelu(const Tensor& x);
Tensor GeluBackward(const Tensor& grad_out, const Tensor& x);
Tensor Silu(const Tensor& x);
Tensor SiluBackward(const Tensor& grad_out, const Tensor& x);
Tensor Relu(const Tensor& x);
Tensor ReluBackward(const Tensor& grad_out, const Tensor& x);

Tensor SwiGlu(const Tensor& gate, const Tensor& up);
struct SwiGluGrads {
  Tensor grad_gate;
  Tensor grad_up;
};
SwiGluGrads SwiGluBackward(const Tensor& grad_out, const Tensor& gate, const Tensor& up);

}  // namespace tessera::ops

// Registration functions of the quant family's kernel files (register.cc
// calls them all).
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx::quant {

void RegisterQuantizeKernels(OpRegistry& r);  // quantize.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void RegisterQLinearKernels(OpRegistry& r);   // qlinear.cc: QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger

}  // namespace tessera::onnx::quant

// Registration functions of the elementwise family's files (called by
// RegisterElementwiseOps in register.cc).
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx::elementwise {

void RegisterUnaryMathOps(OpRegistry& r);   // unary_math.cc: Abs, Neg, Sqrt, Exp, trig, Round, IsNaN, Not, ...
void RegisterActivationOps(OpRegistry& r);  // activations.cc: Sigmoid, Relu, Elu, Selu, PRelu, Gelu, ...
void RegisterBinaryMathOps(OpRegistry& r);  // binary_math.cc: Add, Sub, Mul, Div, Pow, Mod, BitShift
void RegisterLogicOps(OpRegistry& r);       // logic_ops.cc: And/Or/Xor/Not, Bitwise*, comparisons
void RegisterVariadicOps(OpRegistry& r);    // variadic_ops.cc: Max, Min, Sum, Mean, Clip, Where
void RegisterCastOps(OpRegistry& r);        // cast_ops.cc: Cast, CastLike

}  // namespace tessera::onnx::elementwise

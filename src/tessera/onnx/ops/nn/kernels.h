// Registration functions of the nn family's kernel files (each registers its
// operators; register.cc calls them all).
#pragma once

#include "tessera/onnx/op.h"

namespace tessera::onnx::nn {

void RegisterConvKernels(OpRegistry& r);       // conv.cc: Conv, ConvTranspose
void RegisterPoolKernels(OpRegistry& r);       // pool.cc: MaxPool, AveragePool, LpPool, Global*Pool, MaxUnpool
void RegisterNormKernels(OpRegistry& r);       // norm.cc: BatchNormalization, InstanceNormalization, LayerNormalization
void RegisterLocalNormKernels(OpRegistry& r);  // lrn.cc: LRN, MeanVarianceNormalization
void RegisterGemmKernels(OpRegistry& r);       // gemm.cc: Gemm, MatMul
void RegisterDropoutKernels(OpRegistry& r);    // dropout.cc: Dropout
void RegisterResizeKernels(OpRegistry& r);     // resize.cc: Resize, Upsample
void RegisterSampleKernels(OpRegistry& r);     // sample.cc: GridSample, RoiAlign

}  // namespace tessera::onnx::nn

// Internal to ops/conv: the algorithms as values — which apply to a
// geometry, the shape heuristic kAuto falls back on, and one entry point per
// pass that runs a named algorithm on raw buffers (the kernels of
// conv_internal.h and winograd.h behind one switch, shared by ops::Conv2d,
// Conv2dBackward and the algorithm tuner). Buffers as in conv_internal.h.
// Thread-safe.
#pragma once

#include <vector>

#include "tessera/ops/conv/conv.h"
#include "tessera/ops/conv/conv_internal.h"

namespace tessera::ops::conv {

// Whether `algo` (not kAuto) computes this geometry.
bool Applies(Conv2dAlgo algo, const ConvGeom& g);

// kAuto's choice by shape alone: depthwise, 1x1 GEMM, direct for tiny
// problems, Winograd F(4x4,3x3) for 3x3 stride-1 layers with >= 8 input
// and output channels, else im2col.
Conv2dAlgo HeuristicAlgo(const ConvGeom& g);

// The algorithms the tuner times for g (the heuristic's choice first):
// every one that applies, the direct loops only for small problems.
std::vector<Conv2dAlgo> TuningCandidates(const ConvGeom& g);

void RunForward(Conv2dAlgo algo, const ConvGeom& g, const float* x, const float* w, const float* bias, float* y);
void RunBackwardX(Conv2dAlgo algo, const ConvGeom& g, const float* gy, const float* w, float* gx);
void RunBackwardW(Conv2dAlgo algo, const ConvGeom& g, const float* gy, const float* x, float* gw);

}  // namespace tessera::ops::conv

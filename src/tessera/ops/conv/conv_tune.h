// Internal to ops/conv: kAuto's measured choice of algorithm. Under
// TESSERA_TUNE=1 (tile/autotune.h) the first convolution of a geometry
// class with more than one applicable algorithm and >= 2^22 multiply-adds
// times every candidate (conv_algos.h: TuningCandidates) on scratch buffers
// of its shape — one forward, grad_x and grad_w pass each, what a training
// step runs, best of 3 after a warm-up — and stores the fastest in the
// tuner's cache ("conv" section of tune.json), so later calls and later
// processes on this CPU reuse it. The heuristic's choice is kept unless
// another is >= 3 % faster. TESSERA_TUNE=0 (the tests' setting) uses the
// heuristic alone; force retunes each class once per process. A cached
// entry naming an algorithm that does not apply is ignored and retuned.
// Algorithms differ in rounding (Winograd's bound: docs/winograd.md), so
// the choice can change results at that level, never beyond it.
// Thread-safe.
#pragma once

#include <string>

#include "tessera/ops/conv/conv.h"
#include "tessera/ops/conv/conv_internal.h"

namespace tessera::ops::conv {

// The algorithm kAuto runs for g.
Conv2dAlgo AutoAlgo(const ConvGeom& g);

// The cache key of g's class: layout, batch rounded to the nearest power of
// two, every other dimension exact, threads. Exposed for tests and tools.
std::string ConvShapeKey(const ConvGeom& g, int threads);

}  // namespace tessera::ops::conv

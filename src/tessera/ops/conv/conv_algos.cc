// The algorithm switch of ops/conv (see conv_algos.h).
#include "tessera/ops/conv/conv_algos.h"

#include "tessera/ops/conv/winograd.h"

namespace tessera::ops::conv {
namespace {

// Problems below this many multiply-adds run the direct loops under the
// heuristic (packing and GEMM set-up cost more than they save).
constexpr double kDirectMaxMacs = 1 << 13;
// The tuner also times the direct loops up to this many multiply-adds.
constexpr double kTuneDirectMaxMacs = 1 << 22;
// The heuristic takes Winograd F(4x4,3x3) for 3x3 stride-1 layers with at
// least this many input and output channels (below it the transforms
// outweigh the saved multiplies; measured with `tessera bench conv`,
// docs/conv.md).
constexpr int64_t kWinogradMinChannels = 8;

winograd::Tile WinogradTile(Conv2dAlgo algo) {
  return algo == Conv2dAlgo::kWinograd2x2 ? winograd::Tile::kF2x2 : winograd::Tile::kF4x4;
}

}  // namespace

bool Applies(Conv2dAlgo algo, const ConvGeom& g) {
  switch (algo) {
    case Conv2dAlgo::kDirect:
    case Conv2dAlgo::kIm2col: return true;
    case Conv2dAlgo::kGemm1x1: return g.is_1x1();
    case Conv2dAlgo::kDepthwise: return g.is_depthwise();
    case Conv2dAlgo::kWinograd2x2:
    case Conv2dAlgo::kWinograd4x4: return g.is_winograd_shape();
    case Conv2dAlgo::kAuto: return false;
  }
  return false;
}

Conv2dAlgo HeuristicAlgo(const ConvGeom& g) {
  if (g.is_depthwise()) return Conv2dAlgo::kDepthwise;
  if (g.is_1x1()) return Conv2dAlgo::kGemm1x1;
  if (g.flops() / 2 < kDirectMaxMacs) return Conv2dAlgo::kDirect;
  if (g.is_winograd_shape() && g.C >= kWinogradMinChannels && g.K >= kWinogradMinChannels) {
    return Conv2dAlgo::kWinograd4x4;
  }
  return Conv2dAlgo::kIm2col;
}

std::vector<Conv2dAlgo> TuningCandidates(const ConvGeom& g) {
  std::vector<Conv2dAlgo> out = {HeuristicAlgo(g)};
  for (Conv2dAlgo a : {Conv2dAlgo::kDepthwise, Conv2dAlgo::kGemm1x1, Conv2dAlgo::kWinograd4x4, Conv2dAlgo::kWinograd2x2,
                       Conv2dAlgo::kIm2col, Conv2dAlgo::kDirect}) {
    if (a == out.front() || !Applies(a, g)) continue;
    if (a == Conv2dAlgo::kDirect && g.flops() / 2 > kTuneDirectMaxMacs) continue;
    out.push_back(a);
  }
  return out;
}

void RunForward(Conv2dAlgo algo, const ConvGeom& g, const float* x, const float* w, const float* bias, float* y) {
  switch (algo) {
    case Conv2dAlgo::kIm2col: Im2colForward(g, x, w, bias, y); break;
    case Conv2dAlgo::kGemm1x1: Gemm1x1Forward(g, x, w, bias, y); break;
    case Conv2dAlgo::kDepthwise: DepthwiseForward(g, x, w, bias, y); break;
    case Conv2dAlgo::kWinograd2x2:
    case Conv2dAlgo::kWinograd4x4:
      winograd::Conv3x3Forward(WinogradTile(algo), g.layout, x, g.N, g.C, g.H, g.W, w, g.K, g.ph, g.pw, bias, y);
      break;
    default: DirectForward(g, x, w, bias, y); break;
  }
}

void RunBackwardX(Conv2dAlgo algo, const ConvGeom& g, const float* gy, const float* w, float* gx) {
  switch (algo) {
    case Conv2dAlgo::kIm2col: Im2colBackwardX(g, gy, w, gx); break;
    case Conv2dAlgo::kGemm1x1: Gemm1x1BackwardX(g, gy, w, gx); break;
    case Conv2dAlgo::kDepthwise: DepthwiseBackwardX(g, gy, w, gx); break;
    case Conv2dAlgo::kWinograd2x2:
    case Conv2dAlgo::kWinograd4x4: {
      // grad_x is the 3x3 convolution of grad_y (padded by 2 - pad) with
      // the weights rotated by 180 degrees and K, C swapped (winograd.h).
      float* w_rot = ConvScratch(3, g.K * g.C * 9);
      winograd::RotatedTransposedWeight(w, g.K, g.C, w_rot);
      winograd::Conv3x3Forward(WinogradTile(algo), g.layout, gy, g.N, g.K, g.P, g.Q, w_rot, g.C, 2 - g.ph, 2 - g.pw,
                               nullptr, gx);
      break;
    }
    default: DirectBackwardX(g, gy, w, gx); break;
  }
}

void RunBackwardW(Conv2dAlgo algo, const ConvGeom& g, const float* gy, const float* x, float* gw) {
  switch (algo) {
    case Conv2dAlgo::kIm2col:
    case Conv2dAlgo::kWinograd2x2:  // the weight gradient is not a 3x3 forward:
                                    // im2col
    case Conv2dAlgo::kWinograd4x4: Im2colBackwardW(g, gy, x, gw); break;
    case Conv2dAlgo::kGemm1x1: Gemm1x1BackwardW(g, gy, x, gw); break;
    case Conv2dAlgo::kDepthwise: DepthwiseBackwardW(g, gy, x, gw); break;
    default: DirectBackwardW(g, gy, x, gw); break;
  }
}

}  // namespace tessera::ops::conv

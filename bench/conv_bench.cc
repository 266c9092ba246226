// Conv2d throughput on ResNet-50's convolution layers (torchvision v1.5:
// stride on the 3x3 of each stage's first block): conv1 7x7/2, the 1x1
// reduce / expand / projection layers and the 3x3 layers (incl. stride 2) of
// the 56x56, 28x28, 14x14 and 7x7 stages (plus three MobileNetV2-style
// depthwise layers). For each layer, layout and
// applicable algorithm (forced; Winograd F(2x2,3x3) and F(4x4,3x3) on the
// 3x3 stride-1 layers), prints the median times of the forward, of
// grad_x (none for conv1, whose input is the image) and of grad_w + grad_bias,
// their total, and GFLOP/s (2*N*K*P*Q*C*R*S per pass; the backward counts
// one pass per gradient).
// Algorithms are interleaved within each repeat so that load changes on a
// shared machine hit them alike.
//   ./conv_bench [--batch 8] [--threads T] [--repeats 5] [--layout nchw|nhwc|both]
//                [--filter SUBSTRING] [--direct] [--no-backward]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/ops/conv/conv.h"
#include "tessera/tensor/rng.h"

namespace {

using tessera::Shape;
using tessera::Tensor;
using tessera::ops::Conv2dAlgo;
using tessera::ops::Conv2dOptions;
using tessera::ops::ImageLayout;

struct Layer {
  const char* name;
  int64_t C, H, K, R, stride, pad;
  int64_t groups = 1;
};

const Layer kLayers[] = {
    {"conv1_7x7s2", 3, 224, 64, 7, 2, 3},
    {"s1_1x1_64-64", 64, 56, 64, 1, 1, 0},
    {"s1_3x3_64", 64, 56, 64, 3, 1, 1},
    {"s1_1x1_64-256", 64, 56, 256, 1, 1, 0},
    {"s1_1x1_256-64", 256, 56, 64, 1, 1, 0},
    {"s2_1x1_256-128", 256, 56, 128, 1, 1, 0},
    {"s2_3x3_128s2", 128, 56, 128, 3, 2, 1},
    {"s2_1x1_256-512s2", 256, 56, 512, 1, 2, 0},
    {"s2_3x3_128", 128, 28, 128, 3, 1, 1},
    {"s2_1x1_128-512", 128, 28, 512, 1, 1, 0},
    {"s2_1x1_512-128", 512, 28, 128, 1, 1, 0},
    {"s3_1x1_512-256", 512, 28, 256, 1, 1, 0},
    {"s3_3x3_256s2", 256, 28, 256, 3, 2, 1},
    {"s3_1x1_512-1024s2", 512, 28, 1024, 1, 2, 0},
    {"s3_3x3_256", 256, 14, 256, 3, 1, 1},
    {"s3_1x1_256-1024", 256, 14, 1024, 1, 1, 0},
    {"s3_1x1_1024-256", 1024, 14, 256, 1, 1, 0},
    {"s4_1x1_1024-512", 1024, 14, 512, 1, 1, 0},
    {"s4_3x3_512s2", 512, 14, 512, 3, 2, 1},
    {"s4_1x1_1024-2048s2", 1024, 14, 2048, 1, 2, 0},
    {"s4_3x3_512", 512, 7, 512, 3, 1, 1},
    {"s4_1x1_512-2048", 512, 7, 2048, 1, 1, 0},
    {"s4_1x1_2048-512", 2048, 7, 512, 1, 1, 0},
    // Not ResNet-50: MobileNetV2-style depthwise 3x3 layers.
    {"dw_3x3_144", 144, 56, 144, 3, 1, 1, 144},
    {"dw_3x3_96s2", 96, 112, 96, 3, 2, 1, 96},
    {"dw_3x3_384", 384, 14, 384, 3, 1, 1, 384},
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

template <typename F>
double TimeMs(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 8;
  int threads = 0, repeats = 5;
  std::string layouts = "both", filter;
  bool direct = false, backward = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch") batch = std::atoll(next());
    else if (a == "--threads") threads = std::atoi(next());
    else if (a == "--repeats") repeats = std::max(1, std::atoi(next()));
    else if (a == "--layout") layouts = next();
    else if (a == "--filter") filter = next();
    else if (a == "--direct") direct = true;
    else if (a == "--no-backward") backward = false;
    else {
      std::fprintf(stderr,
                   "usage: conv_bench [--batch N] [--threads T] [--repeats R] [--layout nchw|nhwc|both] "
                   "[--filter S] [--direct] [--no-backward]\n");
      return 2;
    }
  }
  if (threads > 0) omp_set_num_threads(threads);
  std::printf("conv_bench: batch %lld, %d threads, median of %d repeats (interleaved)\n",
              static_cast<long long>(batch), omp_get_max_threads(), repeats);
  std::printf("%-20s %-5s %-10s %9s %8s %9s %9s %10s %8s\n", "layer", "lay", "algo", "fwd_ms", "GFLOP/s",
              "bwd_x_ms", "bwd_w_ms", "total_ms", "GFLOP/s");
  std::vector<ImageLayout> lays;
  if (layouts == "both" || layouts == "nchw") lays.push_back(ImageLayout::kNCHW);
  if (layouts == "both" || layouts == "nhwc") lays.push_back(ImageLayout::kNHWC);
  for (const Layer& l : kLayers) {
    if (!filter.empty() && std::string(l.name).find(filter) == std::string::npos) continue;
    for (ImageLayout layout : lays) {
      Conv2dOptions base;
      base.stride_h = base.stride_w = l.stride;
      base.pad_h = base.pad_w = l.pad;
      base.layout = layout;
      base.groups = l.groups;
      const Shape xs = layout == ImageLayout::kNCHW ? Shape{batch, l.C, l.H, l.H} : Shape{batch, l.H, l.H, l.C};
      Tensor x = Tensor::Empty(xs), w = Tensor::Empty({l.K, l.C / l.groups, l.R, l.R}), b = Tensor::Empty({l.K});
      tessera::FillUniform(x, 1, -1, 1);
      tessera::FillUniform(w, 2, -0.1f, 0.1f);
      tessera::FillUniform(b, 3, -1, 1);
      std::vector<Conv2dAlgo> algos = {Conv2dAlgo::kIm2col};
      if (l.R == 1 && l.stride == 1) algos.push_back(Conv2dAlgo::kGemm1x1);
      if (l.groups > 1) algos.push_back(Conv2dAlgo::kDepthwise);
      if (l.R == 3 && l.stride == 1 && l.groups == 1) {  // Winograd's shapes (padding 1 here)
        algos.push_back(Conv2dAlgo::kWinograd2x2);
        algos.push_back(Conv2dAlgo::kWinograd4x4);
      }
      if (direct) algos.push_back(Conv2dAlgo::kDirect);
      const bool need_x = l.C != 3;
      Tensor gy = tessera::ops::Conv2d(x, w, b, base);
      tessera::FillUniform(gy, 4, -1, 1);
      const double P = static_cast<double>(gy.numel()) / batch / l.K;
      const double flops = 2.0 * batch * l.K * P * (l.C / l.groups) * l.R * l.R;
      std::vector<std::vector<double>> fwd(algos.size()), bx(algos.size()), bw(algos.size());
      for (int rep = 0; rep <= repeats; ++rep) {  // rep 0 warms up
        for (size_t a = 0; a < algos.size(); ++a) {
          Conv2dOptions o = base;
          o.algo = algos[a];
          const double f = TimeMs([&] { tessera::ops::Conv2d(x, w, b, o); });
          double tx = 0, tw = 0;
          if (backward && need_x) tx = TimeMs([&] { tessera::ops::Conv2dBackward(gy, x, w, o, true, false, false); });
          if (backward) tw = TimeMs([&] { tessera::ops::Conv2dBackward(gy, x, w, o, false, true, true); });
          if (rep > 0) {
            fwd[a].push_back(f);
            bx[a].push_back(tx);
            bw[a].push_back(tw);
          }
        }
      }
      for (size_t a = 0; a < algos.size(); ++a) {
        const double f = Median(fwd[a]), tx = Median(bx[a]), tw = Median(bw[a]);
        const double total = f + tx + tw, total_flops = flops * (need_x ? 3 : 2);
        std::printf("%-20s %-5s %-10s %9.3f %8.1f %9.3f %9.3f %10.3f %8.1f\n", l.name,
                    tessera::ops::ImageLayoutName(layout), tessera::ops::Conv2dAlgoName(algos[a]), f,
                    flops / f * 1e-6, tx, tw, total, backward ? total_flops / total * 1e-6 : 0.0);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

// Helpers shared by the nn and quant kernels: the sliding-window geometry of
// Conv / ConvTranspose / pooling (kernel_shape, strides, dilations, pads,
// auto_pad, ceil_mode), N-d coordinate stepping, the reference N-d
// convolution loop, batched-matmul broadcasting, and the bridge to
// tessera::Tensor for the float32 fast paths.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/onnx/op.h"
#include "tessera/onnx/value.h"
#include "tessera/tensor/tensor.h"

namespace tessera::onnx::nn {

// Spatial geometry of a windowed op (all vectors have one entry per spatial axis).
struct Window {
  std::vector<int64_t> in, out, kernel, strides, dilations, pads_begin, pads_end;
  int64_t Rank() const { return static_cast<int64_t>(in.size()); }
};

// Reads kernel_shape (`kernel` when the attribute is absent; pass {} to require
// it), strides, dilations, pads and auto_pad of a Conv / pooling node and
// computes the output sizes; `allow_ceil` reads ceil_mode (pools).
StatusOr<Window> ReadWindow(const OpContext& ctx, const std::vector<int64_t>& in_spatial, std::vector<int64_t> kernel,
                            bool allow_ceil);

// Steps a row-major coordinate vector within `shape`; false after the last one.
inline bool NextCoord(std::vector<int64_t>& coord, const std::vector<int64_t>& shape) {
  for (size_t d = coord.size(); d-- > 0;) {
    if (++coord[d] < shape[d]) return true;
    coord[d] = 0;
  }
  return false;
}

// For output position `out_coord` of window `w`, the flat spatial offset into
// the input of each kernel tap (row-major over kernel), or -1 where the tap
// falls in the padding.
void TapOffsets(const Window& w, const std::vector<int64_t>& out_coord, std::vector<int64_t>& offsets);

// Checks an N x C x spatial... input against a weight of M x C/group x k...,
// and builds the conv window (kernel from the weight's shape).
struct ConvShape {
  int64_t n = 0, c = 0, m = 0, group = 1;
  Window win;
};
StatusOr<ConvShape> ReadConvShape(const OpContext& ctx, const std::vector<int64_t>& x_shape,
                                  const std::vector<int64_t>& w_shape);
std::vector<int64_t> ConvOutShape(const ConvShape& s);

// Reference convolution: y[n, m, o] = sum over c, k of xv(x flat index) * wv(w flat index, m)
// with padded taps contributing nothing. `Acc` is the accumulation type.
template <typename Acc, typename XV, typename WV>
void ConvLoop(const ConvShape& s, XV&& xv, WV&& wv, Acc* y) {
  const Window& w = s.win;
  const int64_t in_size = Numel(w.in), out_size = Numel(w.out), k_size = Numel(w.kernel);
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  std::vector<int64_t> coord(w.in.size(), 0), offs;
  if (out_size == 0) return;
  for (int64_t op = 0; op < out_size; ++op, NextCoord(coord, w.out)) {
    TapOffsets(w, coord, offs);
    for (int64_t n = 0; n < s.n; ++n) {
      for (int64_t m = 0; m < s.m; ++m) {
        const int64_t g = m / mg;
        Acc acc{};
        for (int64_t c = 0; c < cg; ++c) {
          const int64_t xbase = (n * s.c + g * cg + c) * in_size, wbase = (m * cg + c) * k_size;
          for (int64_t k = 0; k < k_size; ++k) {
            if (offs[k] >= 0) acc += xv(xbase + offs[k]) * wv(wbase + k, m);
          }
        }
        y[(n * s.m + m) * out_size + op] = acc;
      }
    }
  }
}

// Numpy matmul broadcasting of a [..., M, K] by b [..., K, N] (1-D operands
// promoted and the promoted axes dropped from `out`).
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> out;               // result shape
  std::vector<int64_t> a_batch, b_batch;  // per output batch: offsets (in matrices) into a / b
  bool a_vec = false, b_vec = false;
};
StatusOr<MatMulShape> ReadMatMulShape(const OpContext& ctx, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b);

// float32 Array <-> tessera::Tensor (copies).
Tensor ToTensor(const Array& a);
Array FromTensor(const Tensor& t);

}  // namespace tessera::onnx::nn

// Memory layout of 4-d image tensors shared by convolution, pooling and
// batch normalization: NCHW ([N, C, H, W], PyTorch's default) or NHWC
// ([N, H, W, C], "channels last"). The layout names the order of the
// tensor's axes (a contiguous NHWC tensor has shape [N, H, W, C]), not a
// stride trick. Weights of convolutions are always [K, C/groups, R, S]
// (PyTorch's layout) whatever the activations' layout.
#pragma once

#include <cstdint>

namespace tessera::ops {

enum class ImageLayout { kNCHW, kNHWC };

inline const char* ImageLayoutName(ImageLayout layout) { return layout == ImageLayout::kNCHW ? "NCHW" : "NHWC"; }

// Output extent of a sliding window (convolution or pooling) along one axis:
// floor((in + 2*pad - dilation*(kernel-1) - 1) / stride) + 1, or ceil with
// ceil_mode (PyTorch's rule: the last window must start inside the input or
// the left padding). May be <= 0 for windows larger than the padded input;
// callers reject that.
inline int64_t WindowOutputSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation = 1,
                                bool ceil_mode = false) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace tessera::ops

// 2-d pooling, forward and backward, fp32, NCHW or NHWC (see
// ops/common/image_layout.h): max pooling (returning the argmax of each
// window, the flat index h*W + w within its input plane, as PyTorch's
// max_pool2d_with_indices: the first maximum in row-major window order wins
// ties, a NaN wins over numbers), average pooling (count_include_pad as
// PyTorch: the divisor is the window clipped to the padded input, or to the
// input itself when false; with ceil_mode the last window may be cut short),
// and global average pooling to [N, C]. Output extents follow
// WindowOutputSize (ceil_mode as PyTorch). Padding larger than half the
// kernel, empty inputs or outputs, bad shapes or dtypes, and (backward)
// indices outside [0, H*W) throw OpError. Under ops::UseReference() plain
// loops run. Results do not depend on the thread count. Thread-safe.
// Semantics, kernels and tests: docs/pool-batchnorm.md.
#pragma once

#include <cstdint>

#include "tessera/ops/common/image_layout.h"
#include "tessera/tensor/tensor.h"

namespace tessera::ops {

struct Pool2dOptions {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only
  ImageLayout layout = ImageLayout::kNCHW;
};

struct MaxPool2dResult {
  Tensor y;
  Tensor indices;  // int64, y's shape
};
MaxPool2dResult MaxPool2d(const Tensor& x, const Pool2dOptions& options);
Tensor MaxPool2dBackward(const Tensor& grad_y, const Tensor& indices, const Shape& x_shape,
                         const Pool2dOptions& options);

Tensor AvgPool2d(const Tensor& x, const Pool2dOptions& options);
Tensor AvgPool2dBackward(const Tensor& grad_y, const Shape& x_shape, const Pool2dOptions& options);

Tensor GlobalAvgPool2d(const Tensor& x, ImageLayout layout);  // -> [N, C]
Tensor GlobalAvgPool2dBackward(const Tensor& grad_y, const Shape& x_shape, ImageLayout layout);

}  // namespace tessera::ops

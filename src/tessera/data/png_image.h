// PNG decoding (libpng) and bilinear resizing for image-folder datasets
// (data/image_folder.h).
//
// DecodePng reads a whole file and turns every PNG colour type into 8-bit
// pixels, row-major [H, W, C] (C = `channels`):
//   - palette and gray below 8 bits are expanded, tRNS becomes alpha
//     (png_set_expand); 16-bit samples keep their high byte
//     (png_set_strip_16: v >> 8); alpha is dropped, not composited
//     (png_set_strip_alpha, as PIL's convert("RGB")); interlaced files are
//     deinterlaced; no gamma correction.
//   - channels == 3: gray is replicated to RGB (png_set_gray_to_rgb).
//   - channels == 1: gray stays as it is; colour becomes PIL's "L":
//     (19595 R + 38470 G + 7471 B + 2^15) >> 16 (ITU-R 601-2 luma).
// Errors are Status, never an abort: NotFound / IoError for a file that
// cannot be opened or read, InvalidArgument for one that is not a PNG
// (signature), is truncated or corrupt (libpng's message), or is larger
// than kMaxPngPixels; every message names the file.
//
// ResizeBilinear is PyTorch's F.interpolate(mode="bilinear",
// align_corners=False, antialias=False) on one image: source coordinate
// (dst + 0.5) * in / out - 0.5, clamped at 0, the two nearest pixels
// weighted linearly (edge pixels repeated). It maps 8-bit [H, W, C] to
// float [out_h, out_w, C] in [0, 1] (value / 255). A same-size resize is
// exact. Stateless, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::data {

// Largest decoded image accepted (width x height), against hostile headers.
inline constexpr int64_t kMaxPngPixels = int64_t{1} << 28;

struct DecodedImage {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // [height, width, channels]
};

// `channels` is 1 or 3.
StatusOr<DecodedImage> DecodePng(const std::string& path, int64_t channels);
// The same from bytes in memory (`name` labels errors).
StatusOr<DecodedImage> DecodePngBytes(const std::vector<uint8_t>& bytes, int64_t channels, const std::string& name);

// [image.height, image.width, C] -> [out_h, out_w, C] floats in [0, 1].
std::vector<float> ResizeBilinear(const DecodedImage& image, int64_t out_h, int64_t out_w);

}  // namespace tessera::data

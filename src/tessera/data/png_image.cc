#include "tessera/data/png_image.h"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tessera::data {
namespace {

// Plain data only: libpng leaves ReadPng by longjmp, which must skip no
// destructor.
struct PngErrors {
  char message[256];
};

struct MemoryReader {
  const uint8_t* data;
  size_t size;
  size_t at;
};

void OnPngError(png_structp png, png_const_charp message) {
  auto* e = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", message);
  png_longjmp(png, 1);
}

void OnPngWarning(png_structp, png_const_charp) {}

void ReadFromMemory(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->size - r->at) png_error(png, "unexpected end of file (truncated)");
  std::memcpy(out, r->data + r->at, n);
  r->at += n;
}

// The libpng calls. Objects with destructors live in the caller's frame
// (`out`, `rows`), never in this one, so a longjmp out of libpng leaks
// nothing. false: failed, errors->message says why.
bool ReadPng(png_structp png, png_infop info, int64_t channels, DecodedImage* out, std::vector<png_bytep>* rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  const int color_type = png_get_color_type(png, info);
  const bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (channels == 3 && !color) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int64_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
  const int64_t got = png_get_channels(png, info);
  if (png_get_bit_depth(png, info) != 8 || (got != 1 && got != 3)) {
    png_error(png, "unsupported pixel format after conversion");
  }
  if (width < 1 || height < 1 || width * height > kMaxPngPixels) png_error(png, "image dimensions out of range");
  if (static_cast<int64_t>(png_get_rowbytes(png, info)) != width * got) png_error(png, "unexpected row size");
  out->height = height;
  out->width = width;
  out->channels = got;
  out->pixels.resize(static_cast<size_t>(height * width * got));
  rows->resize(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) (*rows)[y] = out->pixels.data() + y * width * got;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

struct PngReadDeleter {
  png_structp png;
  png_infop info;
  ~PngReadDeleter() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

}  // namespace

StatusOr<DecodedImage> DecodePngBytes(const std::vector<uint8_t>& bytes, int64_t channels, const std::string& name) {
  if (channels != 1 && channels != 3) return InvalidArgument("DecodePng: channels must be 1 or 3, got {}", channels);
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0) {
    return InvalidArgument("'{}' is not a PNG file (no PNG signature in its first 8 bytes)", name);
  }
  PngErrors errors{};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &errors, OnPngError, OnPngWarning);
  if (png == nullptr) return ResourceExhausted("cannot create a PNG reader for '{}'", name);
  PngReadDeleter cleanup{png, png_create_info_struct(png)};
  if (cleanup.info == nullptr) return ResourceExhausted("cannot create a PNG reader for '{}'", name);
  MemoryReader reader{bytes.data(), bytes.size(), 0};
  png_set_read_fn(png, &reader, ReadFromMemory);
  DecodedImage image;
  std::vector<png_bytep> rows;
  if (!ReadPng(png, cleanup.info, channels, &image, &rows)) {
    return InvalidArgument("cannot decode PNG file '{}': {}", name, errors.message);
  }
  if (channels == 1 && image.channels == 3) {  // colour to PIL's "L"
    const size_t n = static_cast<size_t>(image.height * image.width);
    std::vector<uint8_t> gray(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = image.pixels[3 * i], g = image.pixels[3 * i + 1], b = image.pixels[3 * i + 2];
      gray[i] = static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16);
    }
    image.pixels = std::move(gray);
    image.channels = 1;
  }
  if (image.channels != channels) {
    return Internal("DecodePng '{}': {} channels, wanted {}", name, image.channels, channels);
  }
  return image;
}

StatusOr<DecodedImage> DecodePng(const std::string& path, int64_t channels) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return NotFound("cannot open image '{}': {}", path, std::strerror(err));
    return IoError("cannot open image '{}': {}", path, std::strerror(err));
  }
  std::vector<uint8_t> bytes;
  uint8_t buffer[1 << 16];
  for (;;) {
    const size_t n = std::fread(buffer, 1, sizeof buffer, f.get());
    bytes.insert(bytes.end(), buffer, buffer + n);
    if (n < sizeof buffer) break;
  }
  if (std::ferror(f.get())) return IoError("cannot read image '{}': {}", path, std::strerror(errno));
  return DecodePngBytes(bytes, channels, path);
}

std::vector<float> ResizeBilinear(const DecodedImage& image, int64_t out_h, int64_t out_w) {
  const int64_t in_h = image.height, in_w = image.width, C = image.channels;
  std::vector<float> out(static_cast<size_t>(out_h * out_w * C));
  // One axis' taps: the lower source index, whether there is a next one,
  // and the next one's weight (PyTorch's area_pixel_compute_source_index).
  struct Tap {
    int64_t i0, step;
    float w1;
  };
  auto taps = [](int64_t in, int64_t out_n) {
    std::vector<Tap> t(static_cast<size_t>(out_n));
    const float scale = static_cast<float>(in) / static_cast<float>(out_n);
    for (int64_t d = 0; d < out_n; ++d) {
      float src = scale * (static_cast<float>(d) + 0.5f) - 0.5f;
      if (src < 0) src = 0;
      const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(src), in - 1);
      t[d] = {i0, i0 < in - 1 ? 1 : 0, src - static_cast<float>(i0)};
    }
    return t;
  };
  const std::vector<Tap> ty = taps(in_h, out_h), tx = taps(in_w, out_w);
  const uint8_t* p = image.pixels.data();
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap& a = ty[y];
    const uint8_t* r0 = p + a.i0 * in_w * C;
    const uint8_t* r1 = p + (a.i0 + a.step) * in_w * C;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap& b = tx[x];
      const int64_t x0 = b.i0 * C, x1 = (b.i0 + b.step) * C;
      for (int64_t c = 0; c < C; ++c) {
        const float top = (1 - b.w1) * r0[x0 + c] + b.w1 * r0[x1 + c];
        const float bottom = (1 - b.w1) * r1[x0 + c] + b.w1 * r1[x1 + c];
        out[(y * out_w + x) * C + c] = ((1 - a.w1) * top + a.w1 * bottom) / 255.0f;
      }
    }
  }
  return out;
}

}  // namespace tessera::data

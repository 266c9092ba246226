// Test helpers (header-only, for *_test.cc): write PNG files with libpng
// in any colour type and bit depth, and a small image-folder dataset of
// solid colours plus noise. Failures throw std::runtime_error.
#pragma once

#include <png.h>

#include <algorithm>
#include <array>
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::data::testing {

// `raw`: the rows exactly as PNG stores them (packed sub-byte samples,
// big-endian 16-bit samples), height rows of equal length.
inline void WritePng(const std::filesystem::path& path, int width, int height, int color_type, int bit_depth,
                     const std::vector<uint8_t>& raw, const std::vector<png_color>& palette = {},
                     const std::vector<uint8_t>& trns = {}, bool interlace = false) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot create " + path.string());
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  const size_t row_bytes = raw.size() / static_cast<size_t>(height);
  for (int y = 0; y < height; ++y) rows[y] = const_cast<uint8_t*>(raw.data()) + y * row_bytes;
  bool failed = false;
  if (setjmp(png_jmpbuf(png))) {
    failed = true;
  } else {
    png_init_io(png, f);
    png_set_IHDR(png, info, width, height, bit_depth, color_type, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
    if (!trns.empty()) png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
    png_write_info(png, info);
    png_write_image(png, rows.data());
    png_write_end(png, nullptr);
  }
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
  if (failed) throw std::runtime_error("libpng failed to write " + path.string());
}

// 8-bit RGB from [height, width, 3] pixels.
inline void WriteRgb(const std::filesystem::path& path, int width, int height, const std::vector<uint8_t>& rgb) {
  WritePng(path, width, height, PNG_COLOR_TYPE_RGB, 8, rgb);
}

// root/<class_names[c]>/img_NN.png: `per_class` width x height RGB images
// of colour[c] plus uniform noise of +-`noise` per sample (deterministic).
inline void WriteColorFolder(const std::filesystem::path& root, const std::vector<std::string>& class_names,
                             const std::vector<std::array<int, 3>>& colors, int per_class, int width, int height,
                             int noise) {
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<int>((state >> 8) % static_cast<uint32_t>(2 * noise + 1)) - noise;
  };
  for (size_t c = 0; c < class_names.size(); ++c) {
    std::filesystem::create_directories(root / class_names[c]);
    for (int i = 0; i < per_class; ++i) {
      std::vector<uint8_t> px(static_cast<size_t>(width * height * 3));
      for (size_t k = 0; k < px.size(); ++k) {
        px[k] = static_cast<uint8_t>(std::clamp(colors[c][k % 3] + next(), 0, 255));
      }
      char name[32];
      std::snprintf(name, sizeof name, "img_%02d.png", i);
      WriteRgb(root / class_names[c] / name, width, height, px);
    }
  }
}

}  // namespace tessera::data::testing

#include "tessera/data/png_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "tessera/data/png_test_util.h"

namespace tessera::data {
namespace {

namespace fs = std::filesystem;
using testing::WritePng;

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tessera_png_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::vector<uint8_t> Decode(const fs::path& path, int64_t channels, int64_t height, int64_t width) {
  auto d = DecodePng(path.string(), channels);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return {};
  EXPECT_EQ(d->height, height);
  EXPECT_EQ(d->width, width);
  EXPECT_EQ(d->channels, channels);
  return d->pixels;
}

std::vector<uint8_t> ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(PngDecode, EightBitColour) {
  const fs::path dir = TempDir("colour");
  std::vector<uint8_t> rgb(3 * 2 * 3), rgba(3 * 2 * 4), expect_rgba(3 * 2 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37 + 5);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = static_cast<uint8_t>(i * 53 + 11);
  for (size_t p = 0; p < 6; ++p) {
    for (size_t c = 0; c < 3; ++c) expect_rgba[p * 3 + c] = rgba[p * 4 + c];  // alpha dropped, not blended
  }
  WritePng(dir / "rgb.png", 3, 2, PNG_COLOR_TYPE_RGB, 8, rgb);
  WritePng(dir / "rgba.png", 3, 2, PNG_COLOR_TYPE_RGBA, 8, rgba);
  EXPECT_EQ(Decode(dir / "rgb.png", 3, 2, 3), rgb);
  EXPECT_EQ(Decode(dir / "rgba.png", 3, 2, 3), expect_rgba);
  fs::remove_all(dir);
}

TEST(PngDecode, GrayBecomesRgbOrStaysGray) {
  const fs::path dir = TempDir("gray");
  const std::vector<uint8_t> gray = {0, 17, 128, 200, 254, 255};
  std::vector<uint8_t> gray_alpha, replicated;
  for (uint8_t g : gray) {
    gray_alpha.insert(gray_alpha.end(), {g, static_cast<uint8_t>(255 - g)});
    replicated.insert(replicated.end(), {g, g, g});
  }
  WritePng(dir / "g.png", 3, 2, PNG_COLOR_TYPE_GRAY, 8, gray);
  WritePng(dir / "ga.png", 3, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, gray_alpha);
  EXPECT_EQ(Decode(dir / "g.png", 1, 2, 3), gray);
  EXPECT_EQ(Decode(dir / "g.png", 3, 2, 3), replicated);
  EXPECT_EQ(Decode(dir / "ga.png", 1, 2, 3), gray);
  EXPECT_EQ(Decode(dir / "ga.png", 3, 2, 3), replicated);
  // Sub-byte gray expands to the full range: 4-bit v -> 17 v, 1-bit -> 0 | 255.
  WritePng(dir / "g4.png", 4, 1, PNG_COLOR_TYPE_GRAY, 4, {0x0F, 0x7A});
  EXPECT_EQ(Decode(dir / "g4.png", 1, 1, 4), (std::vector<uint8_t>{0, 255, 119, 170}));
  WritePng(dir / "g1.png", 8, 1, PNG_COLOR_TYPE_GRAY, 1, {0xA5});
  EXPECT_EQ(Decode(dir / "g1.png", 1, 1, 8), (std::vector<uint8_t>{255, 0, 255, 0, 0, 255, 0, 255}));
  fs::remove_all(dir);
}

TEST(PngDecode, PaletteBecomesItsColours) {
  const fs::path dir = TempDir("palette");
  const std::vector<png_color> palette = {{10, 20, 30}, {200, 100, 50}, {0, 255, 0}, {255, 255, 255}};
  const std::vector<uint8_t> index = {3, 0, 1, 2, 2, 1};
  std::vector<uint8_t> expect;
  for (uint8_t i : index) expect.insert(expect.end(), {palette[i].red, palette[i].green, palette[i].blue});
  WritePng(dir / "p8.png", 3, 2, PNG_COLOR_TYPE_PALETTE, 8, index, palette);
  EXPECT_EQ(Decode(dir / "p8.png", 3, 2, 3), expect);
  // With transparency (tRNS): the same colours, alpha dropped.
  WritePng(dir / "pt.png", 3, 2, PNG_COLOR_TYPE_PALETTE, 8, index, palette, {0, 128, 255, 7});
  EXPECT_EQ(Decode(dir / "pt.png", 3, 2, 3), expect);
  // 2-bit indices, packed four to a byte: 3, 0, 1, 2.
  WritePng(dir / "p2.png", 4, 1, PNG_COLOR_TYPE_PALETTE, 2, {0xC6}, palette);
  EXPECT_EQ(Decode(dir / "p2.png", 3, 1, 4), (std::vector<uint8_t>(expect.begin(), expect.begin() + 12)));
  fs::remove_all(dir);
}

TEST(PngDecode, SixteenBitKeepsTheHighByte) {
  const fs::path dir = TempDir("sixteen");
  // Big-endian samples; 0x12FF keeps 0x12 (rounding would give 0x13).
  const std::vector<uint16_t> rgb = {0x12FF, 0xABCD, 0x00FF, 0xFF00, 0x8080, 0x7F01};
  std::vector<uint8_t> raw, expect;
  for (uint16_t v : rgb) {
    raw.insert(raw.end(), {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v & 0xFF)});
    expect.push_back(static_cast<uint8_t>(v >> 8));
  }
  WritePng(dir / "rgb16.png", 2, 1, PNG_COLOR_TYPE_RGB, 16, raw);
  EXPECT_EQ(Decode(dir / "rgb16.png", 3, 1, 2), expect);
  WritePng(dir / "g16.png", 6, 1, PNG_COLOR_TYPE_GRAY, 16, raw);
  EXPECT_EQ(Decode(dir / "g16.png", 1, 1, 6), expect);
  std::vector<uint8_t> rgba16;  // RGBA, 16-bit: alpha dropped too
  for (int p = 0; p < 2; ++p) {
    rgba16.insert(rgba16.end(), raw.begin() + 6 * p, raw.begin() + 6 * p + 6);
    rgba16.insert(rgba16.end(), {0x40, 0x00});
  }
  WritePng(dir / "rgba16.png", 2, 1, PNG_COLOR_TYPE_RGBA, 16, rgba16);
  EXPECT_EQ(Decode(dir / "rgba16.png", 3, 1, 2), expect);
  fs::remove_all(dir);
}

TEST(PngDecode, InterlacedEqualsPlain) {
  const fs::path dir = TempDir("interlace");
  std::vector<uint8_t> rgb(7 * 5 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 29 + 3);
  WritePng(dir / "adam7.png", 7, 5, PNG_COLOR_TYPE_RGB, 8, rgb, {}, {}, /*interlace=*/true);
  EXPECT_EQ(Decode(dir / "adam7.png", 3, 5, 7), rgb);
  fs::remove_all(dir);
}

TEST(PngDecode, ColourToGrayIsPilLuma) {
  const fs::path dir = TempDir("luma");
  WritePng(dir / "c.png", 4, 1, PNG_COLOR_TYPE_RGB, 8, {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255});
  // PIL: Image.new("RGB", ...).convert("L") gives 76, 150, 29, 255.
  EXPECT_EQ(Decode(dir / "c.png", 1, 1, 4), (std::vector<uint8_t>{76, 150, 29, 255}));
  fs::remove_all(dir);
}

TEST(PngDecode, BadFilesAreErrorsNamingThem) {
  const fs::path dir = TempDir("bad");
  auto fails = [](const fs::path& p, StatusCode code, const std::string& words) {
    auto d = DecodePng(p.string(), 3);
    ASSERT_FALSE(d.ok()) << p;
    EXPECT_EQ(d.status().code(), code) << d.status().ToString();
    EXPECT_NE(d.status().message().find(p.string()), std::string::npos) << d.status().ToString();
    EXPECT_NE(d.status().message().find(words), std::string::npos) << d.status().ToString();
  };
  fails(dir / "missing.png", StatusCode::kNotFound, "No such file");
  std::vector<uint8_t> garbage(200);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 7919 >> 3);
  WriteBytes(dir / "garbage.png", garbage);
  fails(dir / "garbage.png", StatusCode::kInvalidArgument, "not a PNG");
  WriteBytes(dir / "empty.png", {});
  fails(dir / "empty.png", StatusCode::kInvalidArgument, "not a PNG");

  // A valid file cut anywhere past its signature: every cut is an error.
  std::vector<uint8_t> rgb(16 * 16 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 13 + i / 7);
  WritePng(dir / "ok.png", 16, 16, PNG_COLOR_TYPE_RGB, 8, rgb);
  ASSERT_EQ(Decode(dir / "ok.png", 3, 16, 16), rgb);
  const std::vector<uint8_t> whole = ReadBytes(dir / "ok.png");
  for (size_t cut = 8; cut < whole.size(); ++cut) {
    auto d = DecodePngBytes(std::vector<uint8_t>(whole.begin(), whole.begin() + cut), 3, "cut.png");
    ASSERT_FALSE(d.ok()) << "cut at " << cut << " of " << whole.size();
    EXPECT_NE(d.status().message().find("cut.png"), std::string::npos);
  }
  WriteBytes(dir / "truncated.png", std::vector<uint8_t>(whole.begin(), whole.begin() + whole.size() / 2));
  fails(dir / "truncated.png", StatusCode::kInvalidArgument, "cannot decode PNG");
  // A flipped byte inside the image data: the chunk's CRC no longer matches.
  std::vector<uint8_t> flipped = whole;
  const std::string idat = "IDAT";
  auto at = std::search(flipped.begin(), flipped.end(), idat.begin(), idat.end());
  ASSERT_NE(at, flipped.end());
  at[10] ^= 0x40;
  WriteBytes(dir / "flipped.png", flipped);
  fails(dir / "flipped.png", StatusCode::kInvalidArgument, "cannot decode PNG");
  if (::geteuid() != 0) {  // root reads anything
    WriteBytes(dir / "locked.png", whole);
    ::chmod((dir / "locked.png").c_str(), 0);
    fails(dir / "locked.png", StatusCode::kIoError, "Permission denied");
  }
  fs::remove_all(dir);
}

DecodedImage Gray(int64_t h, int64_t w, std::vector<uint8_t> px) { return {h, w, 1, std::move(px)}; }

void ExpectPixels(const std::vector<float>& got, const std::vector<float>& want_times_255) {
  ASSERT_EQ(got.size(), want_times_255.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want_times_255[i] / 255.0f, 1e-6) << i;
}

TEST(ResizeBilinear, UpscaleByHand) {
  // 2x2 -> 3x3, scale 2/3: source coordinates 0 (clamped from -1/6), 0.5, 7/6 (past
  // the last pixel: repeated).
  std::vector<float> out = ResizeBilinear(Gray(2, 2, {0, 100, 200, 255}), 3, 3);
  ExpectPixels(out, {0, 50, 100, 100, 138.75f, 177.5f, 200, 227.5f, 255});
}

TEST(ResizeBilinear, HalvingAveragesTwoByTwoBlocks) {
  std::vector<uint8_t> px(16);
  for (int i = 0; i < 16; ++i) px[i] = static_cast<uint8_t>(10 * (i / 4) + 3 * (i % 4));  // 10 y + 3 x
  // Source coordinates 0.5 and 2.5: each output is the mean of a 2x2 block.
  ExpectPixels(ResizeBilinear(Gray(4, 4, px), 2, 2), {6.5f, 12.5f, 26.5f, 32.5f});
}

TEST(ResizeBilinear, OneAxisWithChannels) {
  // 1x2 RGB -> 1x4: weights (1, 0), (3/4, 1/4), (1/4, 3/4), (0, 1).
  DecodedImage img{1, 2, 3, {0, 40, 200, 100, 80, 0}};
  ExpectPixels(ResizeBilinear(img, 1, 4), {0, 40, 200, 25, 50, 150, 75, 70, 50, 100, 80, 0});
  // Same size: exact.
  ExpectPixels(ResizeBilinear(img, 1, 2), {0, 40, 200, 100, 80, 0});
}

}  // namespace
}  // namespace tessera::data

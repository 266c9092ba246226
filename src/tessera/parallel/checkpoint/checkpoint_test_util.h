// Helpers for the checkpoint tests: a unique temporary directory removed at
// the end of the test, and small file utilities.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/parallel/checkpoint/box_copy.h"
#include "tessera/parallel/checkpoint/checkpoint_writer.h"

namespace tessera::parallel::checkpoint::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("tessera-ckpt-test-{}-{}-{:08x}", ::getpid(), counter++, rd());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::string ReadFileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFileBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<std::byte> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

// The boxes of a grid: cuts[d] lists dim d's boundaries, from 0 to its extent.
inline std::vector<Box> GridBoxes(const std::vector<std::vector<int64_t>>& cuts) {
  std::vector<Box> boxes(1);
  for (const auto& c : cuts) {
    std::vector<Box> next;
    for (const Box& b : boxes) {
      for (size_t i = 0; i + 1 < c.size(); ++i) {
        Box n = b;
        n.offset.push_back(c[i]);
        n.shape.push_back(c[i + 1] - c[i]);
        next.push_back(n);
      }
    }
    boxes = next;
  }
  return boxes;
}

// Oracle, element by element (independent of CopyBox): the `box` of the
// row-major array `src` of `shape`.
inline std::vector<std::byte> ExtractBox(const std::vector<std::byte>& src, const std::vector<int64_t>& shape,
                                         const Box& box, size_t element_size) {
  int64_t count = 1;
  for (int64_t e : box.shape) count *= e;
  std::vector<std::byte> out(static_cast<size_t>(count) * element_size);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, global = 0, stride = 1;
    std::vector<int64_t> index(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      index[d] = rest % box.shape[d];
      rest /= box.shape[d];
    }
    for (size_t d = shape.size(); d-- > 0;) {
      global += (box.offset[d] + index[d]) * stride;
      stride *= shape[d];
    }
    for (size_t b = 0; b < element_size; ++b) out[i * element_size + b] = src[global * element_size + b];
  }
  return out;
}

// Adds `data` (global `shape`) to `writer` as the slices `boxes`, slice i in
// shard i % writer.num_shards(). The slices' bytes go to `keep_alive`.
inline Status AddTiled(CheckpointWriter& writer, const std::string& name, StorageDtype dtype,
                       const std::vector<int64_t>& shape, const std::vector<std::byte>& data,
                       const std::vector<Box>& boxes, std::vector<std::vector<std::byte>>& keep_alive) {
  keep_alive.reserve(keep_alive.size() + boxes.size() + 64);
  for (size_t i = 0; i < boxes.size(); ++i) {
    keep_alive.push_back(ExtractBox(data, shape, boxes[i], StorageDtypeSize(dtype)));
    SliceToSave s{name, dtype, shape, boxes[i].offset, boxes[i].shape, keep_alive.back().data(),
                  static_cast<int>(i % static_cast<size_t>(writer.num_shards()))};
    TESSERA_RETURN_IF_ERROR(writer.AddSlice(std::move(s)));
  }
  return Status::Ok();
}

}  // namespace tessera::parallel::checkpoint::testing

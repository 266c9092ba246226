#include "tessera/parallel/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "tessera/base/checksum.h"
#include "tessera/parallel/checkpoint/box_copy.h"
#include "tessera/parallel/checkpoint/file_io.h"

namespace tessera::parallel::checkpoint {
namespace {

std::string ShapeText(std::span<const int64_t> shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

struct CheckpointReader::ShardSlot {
  std::mutex mu;
  std::shared_ptr<const SafetensorsFile> file;                 // set once verified
  std::vector<std::pair<std::string, size_t>> slices;          // (tensor, slice index) stored in this file
};

CheckpointReader::CheckpointReader(std::filesystem::path dir, CheckpointIndex index)
    : dir_(std::move(dir)), index_(std::move(index)), shards_(std::make_unique<ShardSlots>()) {
  for (const auto& [file, info] : index_.files) shards_->emplace(file, std::make_unique<ShardSlot>());
  for (const auto& [name, t] : index_.tensors) {
    for (size_t i = 0; i < t.slices.size(); ++i) (*shards_)[t.slices[i].file]->slices.emplace_back(name, i);
  }
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

StatusOr<CheckpointReader> CheckpointReader::Open(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    const bool exists = std::filesystem::exists(dir, ec);
    return NotFound("'{}' is not a checkpoint ({})", dir.string(), exists ? "not a directory" : "no such directory");
  }
  const std::filesystem::path index_path = dir / kIndexFileName;
  if (!std::filesystem::exists(index_path, ec)) {
    return NotFound("'{}' is not a checkpoint (no {})", dir.string(), kIndexFileName);
  }
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(index_path, kMaxIndexBytes));
  TESSERA_ASSIGN_OR_RETURN(CheckpointIndex index, ParseCheckpointIndex(text, index_path.string()));
  for (const auto& [file, info] : index.files) {
    const std::filesystem::path path = dir / file;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      return DataLoss("'{}' is listed in '{}' but cannot be read: {}", path.string(), index_path.string(),
                      ec.message());
    }
    if (size != info.bytes) {
      return DataLoss("'{}' is {} bytes, but '{}' says {} (truncated or replaced)", path.string(), size,
                      index_path.string(), info.bytes);
    }
  }
  return CheckpointReader(dir, std::move(index));
}

const GlobalTensor* CheckpointReader::FindTensor(std::string_view name) const {
  const auto it = index_.tensors.find(std::string(name));
  return it == index_.tensors.end() ? nullptr : &it->second;
}

StatusOr<std::shared_ptr<const SafetensorsFile>> CheckpointReader::LoadShard(const std::string& file) const {
  const std::filesystem::path path = dir_ / file;
  const ShardFileInfo& info = index_.files.at(file);
  StatusOr<MappedFile> opened = MappedFile::Open(path);
  if (!opened.ok() && opened.status().code() == StatusCode::kNotFound) {
    return DataLoss("'{}' is listed in the index but missing", path.string());
  }
  TESSERA_ASSIGN_OR_RETURN(MappedFile mapped, std::move(opened));
  if (mapped.size() != info.bytes) {
    return DataLoss("'{}' is {} bytes, but the index says {} (truncated or replaced)", path.string(), mapped.size(),
                    info.bytes);
  }
  const uint64_t digest = base::Checksum64(mapped.bytes().data(), mapped.size());
  if (digest != info.xxh3_64) {
    return DataLoss("'{}' is corrupt: its XXH3-64 is {}, the index says {}", path.string(), base::HexDigest(digest),
                    base::HexDigest(info.xxh3_64));
  }
  TESSERA_ASSIGN_OR_RETURN(SafetensorsFile parsed, SafetensorsFile::Parse(std::move(mapped), path.string()));
  const auto format = parsed.metadata().find("format");
  if (format == parsed.metadata().end() || format->second != kCheckpointFormat) {
    return DataLoss("'{}' is not a {} shard (its __metadata__ has no \"format\": \"{}\")", path.string(),
                    kCheckpointFormat, kCheckpointFormat);
  }
  const ShardSlot& slot = *shards_->at(file);
  for (const auto& [name, i] : slot.slices) {
    const GlobalTensor& t = index_.tensors.at(name);
    const SliceLocation& s = t.slices[i];
    const SafetensorsFile::Entry* entry = parsed.Find(s.key);
    if (entry == nullptr) {
      return DataLoss("'{}' has no tensor '{}' (the slice of '{}' at offset {})", path.string(), s.key, name,
                      ShapeText(s.offset));
    }
    if (entry->spec.dtype != t.dtype || entry->spec.shape != s.shape) {
      return DataLoss("'{}': tensor '{}' is {} {}, but the index says {} {}", path.string(), s.key,
                      StorageDtypeName(entry->spec.dtype), ShapeText(entry->spec.shape), StorageDtypeName(t.dtype),
                      ShapeText(s.shape));
    }
  }
  if (parsed.tensors().size() != slot.slices.size()) {
    return DataLoss("'{}' holds {} tensors, but the index places {} there", path.string(), parsed.tensors().size(),
                    slot.slices.size());
  }
  return std::make_shared<const SafetensorsFile>(std::move(parsed));
}

StatusOr<std::shared_ptr<const SafetensorsFile>> CheckpointReader::Shard(const std::string& file, bool reload) const {
  const auto it = shards_->find(file);
  if (it == shards_->end()) return Internal("'{}': shard '{}' is not in the index", dir_.string(), file);
  ShardSlot& slot = *it->second;
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.file != nullptr && !reload) return slot.file;
  TESSERA_ASSIGN_OR_RETURN(slot.file, LoadShard(file));
  return slot.file;
}

std::vector<std::string> CheckpointReader::FilesFor(std::string_view name, std::span<const int64_t> offset,
                                                   std::span<const int64_t> shape) const {
  std::vector<std::string> out;
  const GlobalTensor* t = FindTensor(name);
  if (t == nullptr || offset.size() != t->shape.size() || shape.size() != t->shape.size()) return out;
  const Box want{{offset.begin(), offset.end()}, {shape.begin(), shape.end()}};
  for (const SliceLocation& s : t->slices) {
    if (IntersectBoxes(want, Box{s.offset, s.shape}) && std::find(out.begin(), out.end(), s.file) == out.end()) {
      out.push_back(s.file);
    }
  }
  return out;
}

Status CheckpointReader::ReadMany(std::span<const ReadRequest> requests, int threads) const {
  // Groups by the first shard each request reads (one task per shard).
  std::map<std::string, std::vector<const ReadRequest*>> groups;
  for (const ReadRequest& r : requests) {
    const std::vector<std::string> files = FilesFor(r.name, r.offset, r.shape);
    groups[files.empty() ? std::string() : files.front()].push_back(&r);
  }
  std::vector<const std::vector<const ReadRequest*>*> tasks;
  for (const auto& [file, group] : groups) tasks.push_back(&group);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(tasks.size())));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < tasks.size();) {
      for (const ReadRequest* r : *tasks[i]) {
        Status st = ReadSliceInto(r->name, r->offset, r->shape, r->out);
        if (st.ok()) continue;
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = st;
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return first;
}

StatusOr<VerifyReport> CheckpointReader::Verify() const {
  VerifyReport report;
  for (const auto& [file, info] : index_.files) {
    TESSERA_ASSIGN_OR_RETURN(auto shard, Shard(file, /*reload=*/true));
    report.bytes += shard->file_size();
    ++report.files;
  }
  report.tensors = static_cast<int64_t>(index_.tensors.size());
  return report;
}

StatusOr<const GlobalTensor*> CheckpointReader::CheckRequest(std::string_view name, std::span<const int64_t> offset,
                                                             std::span<const int64_t> shape) const {
  const GlobalTensor* t = FindTensor(name);
  if (t == nullptr) return NotFound("checkpoint '{}' has no tensor '{}'", dir_.string(), name);
  const Box box{{offset.begin(), offset.end()}, {shape.begin(), shape.end()}};
  if (offset.size() != t->shape.size() || shape.size() != t->shape.size() || !BoxInside(box, t->shape)) {
    return OutOfRange("checkpoint '{}': box at offset {} with shape {} is not inside tensor '{}' of shape {}",
                      dir_.string(), ShapeText(offset), ShapeText(shape), name, ShapeText(t->shape));
  }
  return t;
}

Status CheckpointReader::ReadSliceInto(std::string_view name, std::span<const int64_t> offset,
                                       std::span<const int64_t> shape, std::span<std::byte> out) const {
  TESSERA_ASSIGN_OR_RETURN(const GlobalTensor* t, CheckRequest(name, offset, shape));
  const size_t element_size = StorageDtypeSize(t->dtype);
  const uint64_t bytes = static_cast<uint64_t>(*ShapeVolume(shape, element_size));  // inside the tensor: no overflow
  if (out.size() != bytes) {
    return InvalidArgument("reading '{}' {}: the box is {} bytes, the buffer {}", name, ShapeText(shape), bytes,
                           out.size());
  }
  const Box want{{offset.begin(), offset.end()}, {shape.begin(), shape.end()}};
  for (const SliceLocation& s : t->slices) {
    const std::optional<Box> common = IntersectBoxes(want, Box{s.offset, s.shape});
    if (!common) continue;
    TESSERA_ASSIGN_OR_RETURN(auto shard, Shard(s.file));
    const SafetensorsFile::Entry* entry = shard->Find(s.key);  // present, right dtype/shape: checked by LoadShard
    const std::span<const std::byte> src = shard->TensorBytes(*entry);
    std::vector<int64_t> src_start(shape.size()), dst_start(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      src_start[d] = common->offset[d] - s.offset[d];
      dst_start[d] = common->offset[d] - offset[d];
    }
    CopyBox(src.data(), s.shape, src_start, out.data(), shape, dst_start, common->shape, element_size);
  }
  return Status::Ok();
}

StatusOr<TensorData> CheckpointReader::ReadSlice(std::string_view name, std::span<const int64_t> offset,
                                                 std::span<const int64_t> shape) const {
  TESSERA_ASSIGN_OR_RETURN(const GlobalTensor* t, CheckRequest(name, offset, shape));
  // Load (and check) the overlapping shards before allocating: the index
  // alone could claim any size; the shards prove the bytes exist.
  const Box want{{offset.begin(), offset.end()}, {shape.begin(), shape.end()}};
  for (const SliceLocation& s : t->slices) {
    if (IntersectBoxes(want, Box{s.offset, s.shape})) TESSERA_RETURN_IF_ERROR(Shard(s.file).status());
  }
  TensorData data;
  data.dtype = t->dtype;
  data.shape.assign(shape.begin(), shape.end());
  data.bytes.resize(static_cast<size_t>(*ShapeVolume(shape, StorageDtypeSize(t->dtype))));
  TESSERA_RETURN_IF_ERROR(ReadSliceInto(name, offset, shape, data.bytes));
  return data;
}

StatusOr<TensorData> CheckpointReader::ReadTensor(std::string_view name) const {
  const GlobalTensor* t = FindTensor(name);
  if (t == nullptr) return NotFound("checkpoint '{}' has no tensor '{}'", dir_.string(), name);
  const std::vector<int64_t> zeros(t->shape.size(), 0);
  return ReadSlice(name, zeros, t->shape);
}

}  // namespace tessera::parallel::checkpoint

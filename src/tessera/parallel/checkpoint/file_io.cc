#include "tessera/parallel/checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tessera::parallel::checkpoint {
namespace {

std::string Errno() { return std::strerror(errno); }

// Closes a descriptor on scope exit unless released.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` read-only (non-blocking: no hang on a FIFO) and checks it is
// a regular file; *size gets its length. The caller closes the descriptor.
StatusOr<int> OpenRegularFile(const std::filesystem::path& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("'{}' does not exist", path.string());
    return IoError("cannot open '{}': {}", path.string(), Errno());
  }
  struct stat st;
  Status bad;
  if (::fstat(fd, &st) != 0) {
    bad = IoError("cannot stat '{}': {}", path.string(), Errno());
  } else if (!S_ISREG(st.st_mode)) {
    bad = IoError("'{}' is not a regular file", path.string());
  }
  if (!bad.ok()) {
    ::close(fd);
    return bad;
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

StatusOr<MappedFile> MappedFile::Open(const std::filesystem::path& path) {
  uint64_t bytes = 0;
  TESSERA_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &bytes));
  FdCloser closer{fd};
  MappedFile file;
  file.size_ = static_cast<size_t>(bytes);
  if (file.size_ == 0) return file;
  // Shards are read whole (digest, then slices): populate the mapping in one
  // sequential pass instead of faulting it in page by page.
  void* addr = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  if (addr == MAP_FAILED) return IoError("cannot map '{}' ({} bytes): {}", path.string(), file.size_, Errno());

  const size_t size = file.size_;
  file.owner_ = std::shared_ptr<const void>(addr, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  file.data_ = static_cast<const std::byte*>(addr);
  return file;
}

MappedFile MappedFile::FromBytes(std::string bytes) {
  auto owned = std::make_shared<const std::string>(std::move(bytes));
  MappedFile file;
  file.data_ = reinterpret_cast<const std::byte*>(owned->data());
  file.size_ = owned->size();
  file.owner_ = std::move(owned);
  return file;
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path, std::filesystem::path tmp_path, int fd)
    : path_(std::move(path)), tmp_path_(std::move(tmp_path)), fd_(fd) {}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      fd_(std::exchange(other.fd_, -1)),
      committed_(std::exchange(other.committed_, true)),
      checksum_(std::move(other.checksum_)) {}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_) ::unlink(tmp_path_.c_str());
  committed_ = true;
}

StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::filesystem::path& path) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create '{}': {}", tmp.string(), Errno());
  return AtomicFileWriter(path, std::move(tmp), fd);
}

Status AtomicFileWriter::Append(const void* data, size_t size) {
  if (fd_ < 0) return FailedPrecondition("'{}' is already closed", tmp_path_.string());
  checksum_.Update(data, size);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status st = IoError("cannot write '{}': {}", tmp_path_.string(), n < 0 ? Errno() : "no progress");
      Abandon();
      return st;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::Commit(Replace replace) {
  if (fd_ < 0) return FailedPrecondition("'{}' is already closed", tmp_path_.string());
  if (::fsync(fd_) != 0) {
    Status st = IoError("cannot fsync '{}': {}", tmp_path_.string(), Errno());
    Abandon();
    return st;
  }
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    Status st = IoError("cannot close '{}': {}", tmp_path_.string(), Errno());
    Abandon();
    return st;
  }
  if (replace == Replace::kForbid) {
    // link(2) fails with EEXIST if the target exists: an atomic "create only".
    if (::link(tmp_path_.c_str(), path_.c_str()) == 0) {
      ::unlink(tmp_path_.c_str());
      committed_ = true;
      return Status::Ok();
    }
    const int err = errno;
    if (err == EEXIST) {
      Abandon();
      return AlreadyExists("'{}' already exists; not replacing it", path_.string());
    }
    if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP) {
      Abandon();
      return IoError("cannot link '{}' to '{}': {}", tmp_path_.string(), path_.string(), std::strerror(err));
    }
    // File systems without hard links: check, then rename (not atomic).
    struct stat st;
    if (::stat(path_.c_str(), &st) == 0) {
      Abandon();
      return AlreadyExists("'{}' already exists; not replacing it", path_.string());
    }
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    Status st = IoError("cannot rename '{}' to '{}': {}", tmp_path_.string(), path_.string(), Errno());
    Abandon();
    return st;
  }
  committed_ = true;
  return Status::Ok();
}

Status SyncDirectory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open directory '{}': {}", dir.string(), Errno());
  FdCloser closer{fd};
  if (::fsync(fd) != 0 && errno != EINVAL) return IoError("cannot fsync directory '{}': {}", dir.string(), Errno());
  return Status::Ok();
}

StatusOr<std::string> ReadSmallFile(const std::filesystem::path& path, uint64_t max_bytes) {
  uint64_t bytes = 0;
  TESSERA_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &bytes));
  FdCloser closer{fd};
  if (bytes > max_bytes) {
    return DataLoss("'{}' is {} bytes, more than the {} allowed", path.string(), bytes, max_bytes);
  }
  std::string text(static_cast<size_t>(bytes), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("cannot read '{}': {}", path.string(), Errno());
    if (n == 0) break;  // shrank while reading
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace tessera::parallel::checkpoint

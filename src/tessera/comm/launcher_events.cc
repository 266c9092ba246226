// The agent's event log: see launcher_events.h.
#include "tessera/comm/launcher_events.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "tessera/comm/launcher_process.h"

namespace tessera::comm::launch {

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status EventLog::Open(const std::string& path) {
  if (path.empty()) return Status::Ok();
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  if (ec) return IoError("cannot create the directory of --events {}: {}", path, ec.message());
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return IoError("cannot open --events {}: {}", path, std::strerror(errno));
  path_ = std::filesystem::absolute(p, ec).string();
  if (ec) path_ = path;
  return Status::Ok();
}

void EventLog::Say(const std::string& text) const {
  std::string line = "tessera launch: " + text + "\n";
  WriteAll(stderr_fd_, line.data(), line.size());
}

void EventLog::Record(const std::string& event, nlohmann::json fields, const std::string& message) {
  if (!message.empty()) Say(message);
  if (fd_ < 0) return;
  nlohmann::json j = {{"time", UnixSeconds()}, {"event", event}, {"node", node_rank_}};
  for (auto& [k, v] : fields.items()) j[k] = v;
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // One write: O_APPEND places the whole line atomically at the end.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size())) Say("warning: could not write an event to " + path_);
}

}  // namespace tessera::comm::launch

// Worker side of the launcher agent: see heartbeat.h.
#include "tessera/comm/heartbeat.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/base/logging.h"

namespace tessera::comm {
namespace {

constexpr size_t kMaxAssignment = 1 << 16;

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int out = 0;
  auto [p, ec] = std::from_chars(v, v + std::strlen(v), out);
  return ec == std::errc() && *p == '\0' ? out : fallback;
}

// Sends a whole message on the agent socket without SIGPIPE; false when
// the agent is gone.
bool SendAll(int fd, std::string_view msg) {
  while (!msg.empty()) {
    ssize_t n = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      ::usleep(1000);
      continue;
    }
    if (n <= 0) return false;
    msg.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

class Heartbeat {
 public:
  static Heartbeat& Get() {
    static Heartbeat instance;
    return instance;
  }

  void Start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return;
    started_ = true;
    fd_ = EnvInt("TESSERA_HEARTBEAT_FD", -1);
    if (fd_ < 0 || ::fcntl(fd_, F_GETFD) < 0) {
      fd_ = -1;
      return;
    }
    ::fcntl(fd_, F_SETFD, FD_CLOEXEC);  // not for this worker's own children
    const int ms = std::max(10, EnvInt("TESSERA_HEARTBEAT_MS", 1000));
    thread_ = std::thread([this, ms] { Loop(std::chrono::milliseconds(ms)); });
  }

  bool Send(std::string_view msg) {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (fd_ < 0) return false;
    return SendAll(fd_, msg);
  }

  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop(std::chrono::milliseconds interval) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      const bool alive = Send("H");
      lock.lock();
      if (!alive) {
        TLOG(WARN, "the launcher's agent closed the heartbeat socket; heartbeats stop");
        return;
      }
      cv_.wait_for(lock, interval, [this] { return stop_; });
    }
  }

  std::mutex mu_;
  std::mutex send_mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool stop_ = false;
  int fd_ = -1;
  std::thread thread_;
};

}  // namespace

void StartHeartbeatFromEnvironment() { Heartbeat::Get().Start(); }

bool UnderLaunchAgent() { return EnvInt("TESSERA_HEARTBEAT_FD", -1) >= 0; }

Status AwaitSpareAssignment() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const char* spare = std::getenv("TESSERA_SPARE");
  if (spare == nullptr || std::string_view(spare) != "1") return Status::Ok();
  const int fd = EnvInt("TESSERA_SPARE_FD", -1);
  if (fd < 0 || ::fcntl(fd, F_GETFD) < 0) {
    return FailedPrecondition("TESSERA_SPARE=1 but TESSERA_SPARE_FD does not name an open socket");
  }
  if (!SendAll(fd, "S")) return Unavailable("spare: the launcher's agent is gone (socket fd {})", fd);
  TLOG(INFO, "spare (pid {}) ready; waiting for the launcher's agent to assign a rank", ::getpid());
  // Waits as long as the agent lives: the agent assigns a rank after a
  // failure, or kills the spare when the job ends; EOF means it is gone.
  std::string text;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, 1000);
    if (rc < 0 && errno != EINTR) return IoError("spare: poll on fd {}: {}", fd, std::strerror(errno));
    if (rc <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Unavailable("spare: the launcher's agent closed fd {} before assigning a rank", fd);
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxAssignment) return InvalidArgument("spare: assignment longer than {} bytes", kMaxAssignment);
    if (text.find("\n\n") != std::string::npos) break;
  }
  text.resize(text.find("\n\n") + 1);
  size_t start = 0;
  std::string rank;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl - start);
    start = nl + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) return InvalidArgument("spare: malformed assignment line '{}'", line);
    const std::string key = line.substr(0, eq);
    ::setenv(key.c_str(), line.c_str() + eq + 1, 1);
    if (key == "RANK") rank = line.substr(eq + 1);
  }
  ::unsetenv("TESSERA_SPARE");
  ::unsetenv("TESSERA_SPARE_FD");
  TLOG(INFO, "spare (pid {}) takes over rank {}", ::getpid(), rank);
  return Status::Ok();
}

bool ReportRestored(const std::string& source, int64_t step, int64_t steps_lost) {
  StartHeartbeatFromEnvironment();
  nlohmann::json j = {{"source", source}, {"step", step}, {"steps_lost", steps_lost}};
  std::string msg = j.dump();
  msg.insert(msg.begin(), 'R');
  msg.push_back('\n');
  return Heartbeat::Get().Send(msg);
}

}  // namespace tessera::comm

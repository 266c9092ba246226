// Process plumbing for the launcher: see launcher_process.h.
#include "tessera/comm/launcher_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

namespace tessera::comm::launch {
namespace {

int g_signal_write_fd = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const uint8_t b = static_cast<uint8_t>(sig);
  if (g_signal_write_fd >= 0) {
    ssize_t ignored = ::write(g_signal_write_fd, &b, 1);
    (void)ignored;
  }
  errno = saved;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path_env) {
  if (name.empty()) return InvalidArgument("empty command");
  if (name.find('/') != std::string::npos) {
    if (!IsExecutableFile(name)) return NotFound("command '{}' is not an executable file", name);
    return name;
  }
  size_t start = 0;
  while (start <= path_env.size()) {
    size_t end = path_env.find(':', start);
    if (end == std::string::npos) end = path_env.size();
    std::string dir = path_env.substr(start, end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
    start = end + 1;
  }
  return NotFound("command '{}' not found on PATH ({})", name, path_env);
}

StatusOr<pid_t> SpawnInNewGroup(const std::string& path, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, int stdout_fd, int stderr_fd,
                                int keep_fd) {
  // Everything the child needs is prepared before fork.
  std::vector<char*> argv_c, env_c;
  for (const std::string& a : argv) argv_c.push_back(const_cast<char*>(a.c_str()));
  argv_c.push_back(nullptr);
  for (const std::string& e : env) env_c.push_back(const_cast<char*>(e.c_str()));
  env_c.push_back(nullptr);
  std::vector<char*> sh_argv_c = {const_cast<char*>("sh"), const_cast<char*>(path.c_str())};
  for (size_t i = 1; i < argv.size(); ++i) sh_argv_c.push_back(const_cast<char*>(argv[i].c_str()));
  sh_argv_c.push_back(nullptr);
  const std::string exec_failed = fmt::format("tessera launch: cannot execute '{}': ", path);

  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return ResourceExhausted("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl
    if (keep_fd >= 0) ::fcntl(keep_fd, F_SETFD, 0);
    // Handlers are reset by exec; ignored signals and the mask are not.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(stdout_fd, 1);
    ::dup2(stderr_fd, 2);
    ::execve(path.c_str(), argv_c.data(), env_c.data());
    int err = errno;
    if (err == ENOEXEC) {  // a script without "#!": run it with /bin/sh, as execvp would
      ::execve("/bin/sh", sh_argv_c.data(), env_c.data());
      err = errno;
    }
    ssize_t ignored = ::write(2, exec_failed.data(), exec_failed.size());
    const char* msg = ::strerrordesc_np(err);  // a static table lookup: safe after fork
    if (msg == nullptr) msg = "unknown error";
    ignored = ::write(2, msg, std::strlen(msg));
    ignored = ::write(2, "\n", 1);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent: no race with kill(-pid)
  return pid;
}

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      ::usleep(1000);
      continue;
    }
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

namespace {

// The text a terminal would show for `data` written after a carriage
// return: what follows the last '\r', without a leading erase-line escape.
std::string_view AfterLastReturn(const char* data, size_t n) {
  std::string_view s(data, n);
  const size_t cr = s.rfind('\r');
  if (cr != std::string_view::npos) s.remove_prefix(cr + 1);
  constexpr std::string_view kEraseLine = "\033[2K";
  if (s.substr(0, kEraseLine.size()) == kEraseLine) s.remove_prefix(kEraseLine.size());
  return s;
}

}  // namespace

void LineRelay::Emit(const char* data, size_t n) {
  const std::string_view text = AfterLastReturn(data, n);
  line_.assign(redraw_shown_ ? "\r\033[2K" : "");
  redraw_shown_ = false;
  line_.append(prefix_);
  line_.append(text);
  line_.push_back('\n');
  WriteAll(out_fd_, line_.data(), line_.size());
}

void LineRelay::Redraw(const char* data, size_t n) {
  const std::string_view text = AfterLastReturn(data, n);
  if (text.empty()) return;
  line_.assign("\r\033[2K");
  line_.append(prefix_);
  line_.append(text);
  WriteAll(out_fd_, line_.data(), line_.size());
  redraw_shown_ = true;
}

void LineRelay::Append(const char* data, size_t n) {
  pending_.append(data, n);
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) break;
    Emit(pending_.data() + start, nl - start);
    start = nl + 1;
  }
  while (pending_.size() - start >= kMaxLine) {
    Emit(pending_.data() + start, kMaxLine);
    start += kMaxLine;
  }
  pending_.erase(0, start);
  // A partial line that redraws itself: show its latest state now.
  const size_t cr = pending_.rfind('\r');
  if (cr != std::string::npos) {
    Redraw(pending_.data(), pending_.size());
    pending_.erase(0, cr);
  }
}

void LineRelay::Finish() {
  if (!pending_.empty() && !AfterLastReturn(pending_.data(), pending_.size()).empty()) {
    Emit(pending_.data(), pending_.size());
  } else if (redraw_shown_) {
    WriteAll(out_fd_, "\n", 1);
    redraw_shown_ = false;
  }
  pending_.clear();
}

SignalCatcher::SignalCatcher() {
  if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    status_ = IoError("pipe2: {}", std::strerror(errno));
    return;
  }
  g_signal_write_fd = fds_[1];
  for (int i = 0; i < 5; ++i) {
    struct sigaction sa {};
    sa.sa_handler = kSignals[i] == SIGPIPE ? SIG_IGN : OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | (kSignals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    ::sigaction(kSignals[i], &sa, &old_[i]);
  }
}

SignalCatcher::~SignalCatcher() {
  if (fds_[0] < 0) return;
  for (int i = 0; i < 5; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  g_signal_write_fd = -1;
  ::close(fds_[0]);
  ::close(fds_[1]);
}

std::vector<int> SignalCatcher::Drain() {
  std::vector<int> out;
  uint8_t buf[64];
  for (;;) {
    ssize_t n = ::read(fds_[0], buf, sizeof(buf));
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != SIGCHLD) out.push_back(buf[i]);
    }
  }
  return out;
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

}  // namespace tessera::comm::launch

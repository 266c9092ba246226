// Helpers for integration tests: run a child process with a bounded wait,
// capturing stdout and stderr separately, optionally watching its output
// while it runs (to signal it at the right moment). Never waits unbounded:
// on timeout the child's process group is SIGKILLed and timed_out is set.
// Not thread-safe; one Subprocess per thread. FreePort: a port for a store
// a test starts.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

extern char** environ;

namespace tessera::testing {

// A TCP port for a store a test starts: below the kernel's ephemeral range
// (32768-60999 here), so no outgoing connection of this or a concurrent test
// can be holding it, from a per-process (pid) sequence, and probed free by
// binding it as the store does (any address, SO_REUSEADDR). Kernel-chosen
// ports (bind to 0) or ranges reaching into the ephemeral range collided
// with client sockets of tests running in parallel ("Address already in
// use" under the sanitizers' slower timing).
inline int FreePort() {
  static int next = 20000 + static_cast<int>(::getpid() % 1000) * 12;
  for (int tries = 0; tries < 2000; ++tries) {
    const int port = next++;
    if (next >= 32000) next = 20000;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  return next;
}

struct ProcResult {
  int exit_code = -1;   // when it exited normally
  int term_signal = 0;  // when a signal killed it
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
};

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts argv[0] (a path) with the current environment plus `env`
  // (entries with an empty value are removed), in its own process group.
  Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
    std::map<std::string, std::string> full;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      size_t eq = kv.find('=');
      if (eq != std::string::npos) full[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) {
      if (v.empty()) {
        full.erase(k);
      } else {
        full[k] = v;
      }
    }
    std::vector<std::string> env_list;
    for (const auto& [k, v] : full) env_list.push_back(k + "=" + v);
    std::vector<char*> argv_c, env_c;
    for (const auto& a : argv) argv_c.push_back(const_cast<char*>(a.c_str()));
    argv_c.push_back(nullptr);
    for (const auto& e : env_list) env_c.push_back(const_cast<char*>(e.c_str()));
    env_c.push_back(nullptr);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    start_ = Clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::execve(argv_c[0], argv_c.data(), env_c.data());
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }

  ~Subprocess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  pid_t pid() const { return pid_; }
  const std::string& out() const { return result_.out; }
  const std::string& err() const { return result_.err; }

  // Reads output until stdout+stderr contain `text` `count` times or the
  // timeout passes; true if found.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout, int count = 1) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      if (Count(result_.out, text) + Count(result_.err, text) >= count) return true;
      if (Clock::now() >= deadline || !Pump(deadline)) return false;
    }
  }

  // Waits for exit and EOF on both pipes (bounded).
  ProcResult Finish(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while ((fds_[0] >= 0 || fds_[1] >= 0) && Clock::now() < deadline) Pump(deadline);
    int status = 0;
    while (!reaped_) {
      pid_t p = ::waitpid(pid_, &status, WNOHANG);
      if (p == pid_) {
        reaped_ = true;
        break;
      }
      if (Clock::now() >= deadline) {
        result_.timed_out = true;
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        reaped_ = true;
        break;
      }
      ::usleep(5000);
    }
    result_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result_.term_signal = WTERMSIG(status);
    return result_;
  }

 private:
  static int Count(const std::string& hay, const std::string& needle) {
    int n = 0;
    for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + needle.size())) ++n;
    return n;
  }

  // One poll round; false when both pipes are closed.
  bool Pump(Clock::time_point deadline) {
    pollfd p[2];
    int n = 0;
    int which[2];
    for (int w = 0; w < 2; ++w) {
      if (fds_[w] < 0) continue;
      p[n] = {fds_[w], POLLIN, 0};
      which[n++] = w;
    }
    if (n == 0) return false;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(p, n, static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, 100)))) <= 0) return true;
    for (int i = 0; i < n; ++i) {
      if (p[i].revents == 0) continue;
      char buf[65536];
      ssize_t r = ::read(fds_[which[i]], buf, sizeof(buf));
      if (r > 0) {
        (which[i] == 0 ? result_.out : result_.err).append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        ::close(fds_[which[i]]);
        fds_[which[i]] = -1;
      }
    }
    return true;
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  int fds_[2] = {-1, -1};
  Clock::time_point start_;
  ProcResult result_;
};

// Runs a command to completion (bounded by `timeout`).
inline ProcResult RunCommand(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                             const std::map<std::string, std::string>& env = {}) {
  Subprocess p(argv, env);
  return p.Finish(timeout);
}

// What a finished command did, for failure messages.
inline std::string Diagnose(const ProcResult& r) {
  return "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.term_signal) + " after " +
         std::to_string(r.seconds) + " s\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// A fresh directory for one test's files ("tessera-<name>-<pid>").
inline std::string FreshTempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "tessera-" + name + "-" + std::to_string(::getpid());
  std::string cmd = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

inline std::vector<nlohmann::json> ReadEvents(const std::string& path) {
  std::vector<nlohmann::json> events;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.is_object()) events.push_back(j);
  }
  return events;
}

inline std::vector<nlohmann::json> OfKind(const std::vector<nlohmann::json>& events, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events) {
    if (e.value("event", "") == kind) out.push_back(e);
  }
  return out;
}

}  // namespace tessera::testing

// Process plumbing for the launcher (internal): resolving a command on
// PATH, fork/exec of one rank into its own process group, line relaying
// with a rank prefix, and a self-pipe signal catcher. Not thread-safe:
// used by the launcher's single loop.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "tessera/base/status.h"

namespace tessera::comm::launch {

// The executable for `name`: as is if it contains '/', else the first
// executable match on PATH. NotFound naming the command and PATH.
StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path_env);

// fork + exec `path` with `argv` and `env` ("K=V" entries) in a new process
// group, stdin from /dev/null, stdout/stderr to the given fds; `keep_fd`
// (if >= 0) stays open in the child under the same number (the agent's
// heartbeat socket). The child gets SIGKILL if the launcher dies
// (PR_SET_PDEATHSIG), so a killed launcher leaves no orphaned ranks. Only
// async-signal-safe calls happen between fork and exec; if exec fails the
// child writes a message to `stderr_fd` and exits 127.
StatusOr<pid_t> SpawnInNewGroup(const std::string& path, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env, int stdout_fd, int stderr_fd,
                                int keep_fd = -1);

// Buffers one stream of one rank and writes whole lines, each with a
// prefix, in a single write() each.
// Relays a rank's output line by line with a prefix. A partial line that
// redraws itself with '\r' (a progress bar) is relayed as a redraw of the
// terminal line ("\r\033[2K" + prefix + text) as it arrives; the next
// full line first clears it.
class LineRelay {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;
  LineRelay(std::string prefix, int out_fd) : prefix_(std::move(prefix)), out_fd_(out_fd) {}
  void Append(const char* data, size_t n);
  // Writes a pending partial line (with a newline added).
  void Finish();

 private:
  void Emit(const char* data, size_t n);
  void Redraw(const char* data, size_t n);
  std::string prefix_;
  int out_fd_;
  std::string pending_;
  std::string line_;
  bool redraw_shown_ = false;
};

// Writes all of `text` to `fd` (retrying EINTR/partial writes); false if
// the fd is gone.
bool WriteAll(int fd, const char* data, size_t n);

// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGCHLD that write the
// signal number to a non-blocking self-pipe, and ignores SIGPIPE; restores
// the previous dispositions on destruction. One instance at a time.
class SignalCatcher {
 public:
  SignalCatcher();
  ~SignalCatcher();
  SignalCatcher(const SignalCatcher&) = delete;
  SignalCatcher& operator=(const SignalCatcher&) = delete;
  Status status() const { return status_; }
  int read_fd() const { return fds_[0]; }
  // Drains the pipe; returns the termination signals received (not SIGCHLD).
  std::vector<int> Drain();

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  int fds_[2] = {-1, -1};
  struct sigaction old_[5];
  Status status_;
};

std::string SignalName(int sig);

}  // namespace tessera::comm::launch

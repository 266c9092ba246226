// The launcher's process table: see launcher_workers.h.
#include "tessera/comm/launcher_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tessera::comm::launch {
namespace {

constexpr size_t kMaxReport = 64 * 1024;

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Workers::~Workers() {
  for (auto& w : all_) {
    for (int k = 0; k < 2; ++k) CloseFd(w->pipe_fd[k]);
    CloseFd(w->ctl_fd);
  }
}

std::string Workers::Prefix(const Worker& w) const {
  if (!o_.prefix_output) return "";
  return w.outcome.rank >= 0 ? fmt::format("[rank {}] ", w.outcome.rank) : fmt::format("[spare {}] ", w.spare_id);
}

StatusOr<Worker*> Workers::Spawn(EnvMap env, int rank, int local, int attempt) {
  auto w = std::make_unique<Worker>();
  w->outcome.rank = rank;
  w->local = local;
  w->attempt = attempt;
  w->spare = rank < 0;
  if (w->spare) {
    w->spare_id = next_spare_id_++;
    env.erase("RANK");
    env.erase("LOCAL_RANK");
    env["TESSERA_SPARE"] = std::string(1, '1');
  }
  int ctl[2] = {-1, -1};  // [0]: the agent's end, [1]: the worker's
  if (o_.heartbeat_ms > 0 || w->spare) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
      return IoError("socketpair: {}", std::strerror(errno));
    }
    if (o_.heartbeat_ms > 0) {
      env["TESSERA_HEARTBEAT_FD"] = std::to_string(ctl[1]);
      env["TESSERA_HEARTBEAT_MS"] = std::to_string(o_.heartbeat_ms);
    }
    if (w->spare) env["TESSERA_SPARE_FD"] = std::to_string(ctl[1]);
  }
  std::vector<std::string> env_list;
  env_list.reserve(env.size());
  for (const auto& [k, v] : env) env_list.push_back(fmt::format("{}={}", k, v));
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  auto fail = [&](Status st) {
    for (int* p : {out, err, ctl}) {
      CloseFd(p[0]);
      CloseFd(p[1]);
    }
    return st;
  };
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    return fail(IoError("pipe2: {}", std::strerror(errno)));
  }
  auto pid = SpawnInNewGroup(o_.path, o_.command, env_list, out[1], err[1], ctl[1]);
  if (!pid.ok()) {
    return fail(pid.status().WithContext(
        w->spare ? std::string("while starting a spare") : fmt::format("while starting rank {}", rank)));
  }
  CloseFd(out[1]);
  CloseFd(err[1]);
  CloseFd(ctl[1]);
  w->outcome.pid = *pid;
  w->start = Clock::now();
  w->pipe_fd[0] = out[0];
  w->pipe_fd[1] = err[0];
  w->ctl_fd = ctl[0];
  for (int fd : {out[0], err[0], ctl[0]}) {
    if (fd >= 0) SetNonBlocking(fd);
  }
  w->relay[0] = std::make_unique<LineRelay>(Prefix(*w), o_.stdout_fd);
  w->relay[1] = std::make_unique<LineRelay>(Prefix(*w), o_.stderr_fd);
  all_.push_back(std::move(w));
  return all_.back().get();
}

Status Workers::Assign(Worker& spare, int rank, int local, int attempt, const EnvMap& updates) {
  if (spare.ctl_fd < 0 || spare.outcome.exited) return Unavailable("spare (pid {}) is gone", spare.outcome.pid);
  std::string msg = fmt::format("RANK={}\nLOCAL_RANK={}\n", rank, local);
  for (const auto& [k, v] : updates) {
    if (k.empty() || k.find_first_of("=\n") != std::string::npos || v.find('\n') != std::string::npos) {
      return InvalidArgument("assignment variable {} cannot be sent on one line", k);
    }
    msg += fmt::format("{}={}\n", k, v);
  }
  msg += "\n";
  size_t sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (sent < msg.size()) {
    ssize_t n = ::send(spare.ctl_fd, msg.data() + sent, msg.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN) && Clock::now() < deadline) {
      ::usleep(1000);
    } else {
      return Unavailable("could not send the assignment to spare (pid {}): {}", spare.outcome.pid,
                         n < 0 ? std::strerror(errno) : "closed");
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (spare.relay[k]) spare.relay[k]->Finish();
  }
  spare.outcome.rank = rank;
  spare.local = local;
  spare.attempt = attempt;
  spare.spare_ready = false;
  spare.start = Clock::now();
  spare.relay[0] = std::make_unique<LineRelay>(Prefix(spare), o_.stdout_fd);
  spare.relay[1] = std::make_unique<LineRelay>(Prefix(spare), o_.stderr_fd);
  return Status::Ok();
}

void Workers::ClosePipes(Worker& w) {
  for (int k = 0; k < 2; ++k) {
    if (w.pipe_fd[k] < 0) continue;
    w.relay[k]->Finish();
    CloseFd(w.pipe_fd[k]);
  }
}

void Workers::ReadPipe(Worker& w, int which) {
  char buf[65536];
  for (int i = 0; i < 16; ++i) {  // bounded per turn: one chatty rank cannot starve the others
    ssize_t n = ::read(w.pipe_fd[which], buf, sizeof(buf));
    if (n > 0) {
      w.relay[which]->Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    w.relay[which]->Finish();  // EOF or error
    CloseFd(w.pipe_fd[which]);
    return;
  }
}

void Workers::ReadControl(Worker& w, std::vector<WorkerReport>* reports) {
  char buf[4096];
  for (int i = 0; i < 16; ++i) {
    ssize_t n = ::recv(w.ctl_fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // the worker closed it (exiting): no longer watched
      CloseFd(w.ctl_fd);
      w.heartbeating = false;
      return;
    }
    for (ssize_t k = 0; k < n; ++k) {
      const char c = buf[k];
      if (w.in_report) {
        if (c == '\n') {
          reports->push_back({&w, w.ctl_partial});
          w.ctl_partial.clear();
          w.in_report = false;
        } else if (w.ctl_partial.size() < kMaxReport) {
          w.ctl_partial.push_back(c);
        }
      } else if (c == 'H') {
        w.heartbeating = true;
        w.last_heartbeat = Clock::now();
      } else if (c == 'S') {
        w.spare_ready = w.outcome.rank < 0;
      } else if (c == 'R') {
        w.in_report = true;
      }
    }
  }
}

void Workers::Poll(int extra_fd, std::chrono::milliseconds slice, std::vector<WorkerReport>* reports) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Worker*, int>> owners;  // which: 0/1 pipes, 2 control
  if (extra_fd >= 0) fds.push_back({extra_fd, POLLIN, 0});
  for (auto& w : all_) {
    for (int k = 0; k < 2; ++k) {
      if (w->pipe_fd[k] < 0) continue;
      fds.push_back({w->pipe_fd[k], POLLIN, 0});
      owners.emplace_back(w.get(), k);
    }
    if (w->ctl_fd >= 0) {
      fds.push_back({w->ctl_fd, POLLIN, 0});
      owners.emplace_back(w.get(), 2);
    }
  }
  int rc = ::poll(fds.data(), fds.size(), static_cast<int>(slice.count()));
  if (rc <= 0) return;
  const size_t first = extra_fd >= 0 ? 1 : 0;
  for (size_t k = first; k < fds.size(); ++k) {
    if (fds[k].revents == 0) continue;
    auto [w, which] = owners[k - first];
    if (which == 2) {
      if (w->ctl_fd >= 0) ReadControl(*w, reports);
    } else if (w->pipe_fd[which] >= 0) {
      ReadPipe(*w, which);
    }
  }
}

std::vector<Worker*> Workers::Reap() {
  std::vector<Worker*> exited;
  for (auto& w : all_) {
    if (w->outcome.exited) continue;
    int status = 0;
    pid_t p = ::waitpid(w->outcome.pid, &status, WNOHANG);
    if (p != w->outcome.pid) continue;
    w->outcome.exited = true;
    w->outcome.runtime_s = std::chrono::duration<double>(Clock::now() - w->start).count();
    if (WIFSIGNALED(status)) {
      w->outcome.signal = WTERMSIG(status);
    } else {
      w->outcome.exit_code = WEXITSTATUS(status);
    }
    exited.push_back(w.get());
  }
  return exited;
}

void Workers::Signal(Worker& w, int sig) {
  if (w.outcome.exited) return;
  ::kill(-w.outcome.pid, sig);
  if (sig != SIGKILL) ::kill(-w.outcome.pid, SIGCONT);  // a stopped worker must wake to act on it
  w.outcome.signalled_by_launcher = true;
}

void Workers::Forget(Worker* w) {
  auto it = std::find_if(all_.begin(), all_.end(), [w](const auto& p) { return p.get() == w; });
  if (it == all_.end()) return;
  ClosePipes(**it);
  CloseFd((*it)->ctl_fd);
  all_.erase(it);
}

}  // namespace tessera::comm::launch

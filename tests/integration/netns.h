// NetnsPair: two Linux network namespaces joined by a veth pair — two
// "hosts" with real TCP between them — for multi-host tests on one machine.
// The constructor creates them with `ip netns add` / `ip link add ... type
// veth` (addresses addr_a()/addr_b() on a /24, loopback up in both); the
// destructor deletes both namespaces (which removes the veth). When the
// process is not root or `ip netns` fails, ok() is false and skip_reason()
// says why: tests then GTEST_SKIP(). RunInNamespace forks a child that
// setns()es into a namespace and runs a function there; Wait reaps it with
// a bounded wait. Not thread-safe.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

namespace tessera::testing {

class NetnsPair {
 public:
  NetnsPair() {
    if (::geteuid() != 0) {
      skip_reason_ = "needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) to create network namespaces";
      return;
    }
    static int counter = 0;
    const std::string tag = std::to_string(::getpid()) + "x" + std::to_string(counter++);
    ns_a_ = "tsr" + tag + "a";
    ns_b_ = "tsr" + tag + "b";
    const std::string veth_a = "va" + tag, veth_b = "vb" + tag;  // <= 15 characters
    const std::string commands[] = {
        "ip netns add " + ns_a_,
        "ip netns add " + ns_b_,
        "ip link add " + veth_a + " netns " + ns_a_ + " type veth peer name " + veth_b + " netns " + ns_b_,
        "ip -n " + ns_a_ + " addr add " + addr_a_ + "/24 dev " + veth_a,
        "ip -n " + ns_b_ + " addr add " + addr_b_ + "/24 dev " + veth_b,
        "ip -n " + ns_a_ + " link set " + veth_a + " up",
        "ip -n " + ns_b_ + " link set " + veth_b + " up",
        "ip -n " + ns_a_ + " link set lo up",
        "ip -n " + ns_b_ + " link set lo up",
    };
    for (const std::string& cmd : commands) {
      if (std::system((cmd + " 2>/dev/null").c_str()) != 0) {
        skip_reason_ = "`" + cmd + "` failed (no network namespace support here?)";
        return;
      }
    }
    ok_ = true;
  }

  ~NetnsPair() {
    for (const std::string& ns : {ns_a_, ns_b_}) {
      if (!ns.empty()) (void)std::system(("ip netns del " + ns + " 2>/dev/null").c_str());
    }
  }

  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  bool ok() const { return ok_; }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& ns_a() const { return ns_a_; }
  const std::string& ns_b() const { return ns_b_; }
  const std::string& addr_a() const { return addr_a_; }
  const std::string& addr_b() const { return addr_b_; }

  // Forks a child that enters namespace `ns` and exits with fn()'s value
  // (99 if it cannot enter). Call only while the process has one thread.
  static pid_t RunInNamespace(const std::string& ns, const std::function<int()>& fn) {
    pid_t pid = ::fork();
    if (pid != 0) return pid;
    int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      std::perror("setns");
      ::_exit(99);
    }
    ::close(fd);
    int rc = fn();
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(rc);
  }

  // Reaps `pid` within `timeout` (SIGKILL after it); returns the exit code,
  // 128+signal, or -1 on timeout.
  static int Wait(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  bool ok_ = false;
  std::string skip_reason_;
  std::string ns_a_, ns_b_;
  std::string addr_a_ = "10.213.0.1";
  std::string addr_b_ = "10.213.0.2";
};

}  // namespace tessera::testing

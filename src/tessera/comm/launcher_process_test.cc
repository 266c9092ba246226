// LineRelay: rank output relayed line by line with a prefix; a partial line
// that redraws itself with '\r' (a progress bar) is relayed as terminal-line
// redraws, and the next full line clears it first.
#include "tessera/comm/launcher_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace tessera::comm::launch {
namespace {

// Everything `fn` makes a relay write, read back from a pipe.
template <typename Fn>
std::string Relayed(Fn&& fn) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  {
    LineRelay relay("[rank 0] ", fds[1]);
    fn(relay);
    relay.Finish();
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  ::close(fds[0]);
  return out;
}

void Put(LineRelay& r, const std::string& s) { r.Append(s.data(), s.size()); }

TEST(LineRelay, PrefixesWholeLinesAndFinishesPartialOnes) {
  EXPECT_EQ(Relayed([](LineRelay& r) {
              Put(r, "hello\nwor");
              Put(r, "ld\ntail");
            }),
            "[rank 0] hello\n[rank 0] world\n[rank 0] tail\n");
}

TEST(LineRelay, ProgressBarRedrawsInPlace) {
  const std::string out = Relayed([](LineRelay& r) {
    Put(r, "\r\033[2Kstep 1/3 [#..]");
    Put(r, "\r\033[2Kstep 2/3 [##.]");
    Put(r, "\r\033[2Keval: loss 1.0\n");  // a message clears the bar first
    Put(r, "\r\033[2Kstep 3/3 [###]");
  });
  EXPECT_EQ(out,
            "\r\033[2K[rank 0] step 1/3 [#..]"
            "\r\033[2K[rank 0] step 2/3 [##.]"
            "\r\033[2K[rank 0] eval: loss 1.0\n"
            "\r\033[2K[rank 0] step 3/3 [###]"
            "\r\033[2K[rank 0] step 3/3 [###]\n");
}

}  // namespace
}  // namespace tessera::comm::launch

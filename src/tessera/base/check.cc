#include "tessera/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace tessera::internal {

void CheckFailed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "[tessera] CHECK failed at %s:%d: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : " — ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::internal

// OpError: the exception an operator throws when its arguments are invalid
// (shape mismatch, wrong dtype, index out of range). Operators are composed
// deeply (autograd, models), so they report bad arguments by throwing; the
// boundaries that users call (trainer, CLI, C ABI) catch OpError and turn it
// into a Status with StatusFromOpError. Never thrown across threads: operators
// validate before entering parallel regions.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "tessera/base/status.h"

namespace tessera {

class OpError : public std::runtime_error {
 public:
  explicit OpError(const std::string& message) : std::runtime_error(message) {}
};

inline Status StatusFromOpError(const OpError& e) { return Status(StatusCode::kInvalidArgument, e.what()); }

// Runs f() and converts an OpError into an InvalidArgument Status.
template <typename F>
Status CatchOpErrors(F&& f) {
  try {
    return f();
  } catch (const OpError& e) {
    return StatusFromOpError(e);
  }
}

}  // namespace tessera

// TESSERA_OP_CHECK(cond, "fmt", args...): throws OpError with the formatted
// message (prefix it with the op name) when cond is false.
#define TESSERA_OP_CHECK(cond, ...)                                     \
  do {                                                                  \
    if (__builtin_expect(!(cond), 0)) {                                 \
      throw ::tessera::OpError(::fmt::format(__VA_ARGS__));             \
    }                                                                   \
  } while (0)

// TESSERA_CHECK: invariants that only a bug can break. On failure prints the
// condition, location and an optional formatted message, then aborts.
// Recoverable failures (bad input, I/O, peers) return Status instead.
#pragma once

#include <string>

#include <fmt/format.h>

namespace tessera::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace tessera::internal

#define TESSERA_CHECK(cond, ...)                                                     \
  do {                                                                               \
    if (__builtin_expect(!(cond), 0)) {                                              \
      ::tessera::internal::CheckFailed(__FILE__, __LINE__, #cond,                    \
                                       ::fmt::format("" __VA_ARGS__));               \
    }                                                                                \
  } while (0)

#define TESSERA_CHECK_OK(expr)                                                          \
  do {                                                                                  \
    const ::tessera::Status _tessera_check_st = (expr);                                 \
    if (!_tessera_check_st.ok()) {                                                      \
      ::tessera::internal::CheckFailed(__FILE__, __LINE__, #expr,                       \
                                       _tessera_check_st.ToString());                   \
    }                                                                                   \
  } while (0)

#ifdef NDEBUG
#define TESSERA_DCHECK(cond, ...) \
  do {                            \
  } while (0)
#else
#define TESSERA_DCHECK(cond, ...) TESSERA_CHECK(cond, __VA_ARGS__)
#endif

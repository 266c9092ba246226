// Status and StatusOr<T>: the result of anything that can fail for reasons
// outside the program (I/O, network, peers, bad configs, bad files).
// A Status carries a code, a message saying what went wrong, and a chain of
// context lines saying where ("while loading config 'x.toml'"). Cheap to
// return when OK (no allocation). Value types; not thread-safe to share
// mutably, safe to copy across threads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kOutOfRange,
  kFailedPrecondition,
  kResourceExhausted,
  kDeadlineExceeded,
  kUnavailable,
  kAborted,
  kDataLoss,
  kIoError,
  kUnimplemented,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  const std::string& message() const;
  // Full text: "<Code>: <message>\n  while <context1>\n  while <context2>".
  std::string ToString() const;

  // Returns a copy with one more context line (outermost last).
  Status WithContext(std::string context) const&;
  Status WithContext(std::string context) &&;

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::string context;  // lines joined by '\n'
  };
  std::shared_ptr<const State> state_;
};

#define TESSERA_DEFINE_STATUS_FACTORY(Name, Code)                           \
  template <typename... Args>                                              \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {             \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...)); \
  }
TESSERA_DEFINE_STATUS_FACTORY(InvalidArgument, kInvalidArgument)
TESSERA_DEFINE_STATUS_FACTORY(NotFound, kNotFound)
TESSERA_DEFINE_STATUS_FACTORY(AlreadyExists, kAlreadyExists)
TESSERA_DEFINE_STATUS_FACTORY(OutOfRange, kOutOfRange)
TESSERA_DEFINE_STATUS_FACTORY(FailedPrecondition, kFailedPrecondition)
TESSERA_DEFINE_STATUS_FACTORY(ResourceExhausted, kResourceExhausted)
TESSERA_DEFINE_STATUS_FACTORY(DeadlineExceeded, kDeadlineExceeded)
TESSERA_DEFINE_STATUS_FACTORY(Unavailable, kUnavailable)
TESSERA_DEFINE_STATUS_FACTORY(Aborted, kAborted)
TESSERA_DEFINE_STATUS_FACTORY(DataLoss, kDataLoss)
TESSERA_DEFINE_STATUS_FACTORY(IoError, kIoError)
TESSERA_DEFINE_STATUS_FACTORY(Unimplemented, kUnimplemented)
TESSERA_DEFINE_STATUS_FACTORY(Internal, kInternal)
#undef TESSERA_DEFINE_STATUS_FACTORY

// StatusOr<T>: either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(implicit)
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(implicit)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tessera

#define TESSERA_STATUS_CONCAT_INNER(a, b) a##b
#define TESSERA_STATUS_CONCAT(a, b) TESSERA_STATUS_CONCAT_INNER(a, b)

// Returns early with the Status if `expr` is not OK.
#define TESSERA_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::tessera::Status _tessera_st = (expr);               \
    if (!_tessera_st.ok()) return _tessera_st;            \
  } while (0)

// `TESSERA_ASSIGN_OR_RETURN(auto x, Foo())` declares x from a StatusOr or
// returns its error.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL(TESSERA_STATUS_CONCAT(_tessera_sor_, __LINE__), lhs, expr)
#define TESSERA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

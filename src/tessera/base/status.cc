#include "tessera/base/status.h"

namespace tessera {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kIoError: return "IoError";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_shared<const State>(State{code, std::move(message), {}});
  }
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return state_ ? state_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out = fmt::format("{}: {}", StatusCodeName(state_->code), state_->message);
  if (!state_->context.empty()) {
    out += "\n  while ";
    for (char c : state_->context) {
      out += c;
      if (c == '\n') out += "  while ";
    }
  }
  return out;
}

Status Status::WithContext(std::string context) const& {
  if (ok()) return *this;
  Status copy = *this;
  return std::move(copy).WithContext(std::move(context));
}

Status Status::WithContext(std::string context) && {
  if (ok()) return std::move(*this);
  State next = *state_;
  if (!next.context.empty()) next.context += '\n';
  next.context += context;
  state_ = std::make_shared<const State>(std::move(next));
  return std::move(*this);
}

}  // namespace tessera

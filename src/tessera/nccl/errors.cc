// Errors, versions and environment aliases of the NCCL C API.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "tessera/nccl/internal.h"

namespace tessera::nccl {
namespace {

thread_local std::string t_last_error;

// NCCL_X is read as TESSERA_X when TESSERA_X is unset (Tessera's wins).
void Alias(const char* nccl_name, const char* tessera_name) {
  const char* v = std::getenv(nccl_name);
  if (v == nullptr || std::getenv(tessera_name) != nullptr) return;
  std::string value(v);
  if (std::string(nccl_name) == "NCCL_DEBUG") {
    // NCCL's levels: VERSION, WARN, INFO, ABORT, TRACE.
    if (value == "VERSION" || value == "ABORT") value = "WARN";
  }
  if (std::string(nccl_name) == "NCCL_SOCKET_IFNAME") {
    // NCCL accepts "=eth0" (exact) and "^docker" (exclude): Tessera takes
    // one exact name; prefixes and exclusions are not translated.
    if (!value.empty() && value[0] == '=') value = value.substr(1);
    if (!value.empty() && value[0] == '^') return;
    if (value.find(',') != std::string::npos) value = value.substr(0, value.find(','));
  }
  setenv(tessera_name, value.c_str(), 0);
}

// Before main (knobs read the environment on first use).
__attribute__((constructor)) void LoadTimeAliases() { ApplyEnvAliases(); }

}  // namespace

void ApplyEnvAliases() {
  static const bool done = [] {
    Alias("NCCL_DEBUG", "TESSERA_DEBUG");
    Alias("NCCL_ALGO", "TESSERA_ALGO");
    Alias("NCCL_SOCKET_IFNAME", "TESSERA_SOCKET_IFNAME");
    return true;
  }();
  (void)done;
}

std::chrono::milliseconds WaitBound() {
  static const std::chrono::milliseconds bound = [] {
    int64_t ms = 300000;
    if (const char* v = std::getenv("TESSERA_COMM_TIMEOUT_MS"); v != nullptr && std::atoll(v) > 0) {
      ms = std::atoll(v);
    }
    return std::chrono::milliseconds(std::max<int64_t>(2 * ms, 10000));
  }();
  return bound;
}

ncclResult_t ToResult(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk: return ncclSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kNotFound: return ncclInvalidArgument;
    case StatusCode::kFailedPrecondition:
    case StatusCode::kAlreadyExists:
    case StatusCode::kUnimplemented: return ncclInvalidUsage;
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kUnavailable:
    case StatusCode::kAborted:
    case StatusCode::kDataLoss: return ncclRemoteError;
    case StatusCode::kResourceExhausted:
    case StatusCode::kIoError: return ncclSystemError;
    case StatusCode::kInternal: return ncclInternalError;
  }
  return ncclInternalError;
}

ncclResult_t Fail(const Status& status) {
  if (status.ok()) return ncclSuccess;
  t_last_error = status.ToString();
  return ToResult(status);
}

ncclResult_t Fail(ncclResult_t result, std::string message) {
  t_last_error = std::move(message);
  return result;
}

}  // namespace tessera::nccl

using namespace tessera::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return Fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t /*comm*/) { return t_last_error.c_str(); }

}  // extern "C"

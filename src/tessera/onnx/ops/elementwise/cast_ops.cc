// Cast and CastLike: every pair of numeric / bool / string element types.
// Float -> integer truncates toward zero (NaN -> 0, out of range saturates at
// the 64-bit range, then wraps like numpy); to float16 / bfloat16 rounds to
// nearest even; numbers -> strings use the shortest text that round-trips
// ("0.1", "1.0", "1e-05", "NaN", "INF", "-INF"); strings -> numbers accept
// plain and scientific notation and the case-insensitive "INF", "+INF",
// "-INF", "NaN" (an unparsable string is an error).
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "tessera/onnx/ops/elementwise/elementwise_ops.h"
#include "tessera/onnx/ops/elementwise/elementwise_util.h"

namespace tessera::onnx::elementwise {
namespace {

template <typename From, typename To>
inline To ConvertNumeric(From v) {
  if constexpr (std::is_same_v<From, To>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return Load(v) != 0;
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) {
      return static_cast<To>(v);  // modular (C++20), as numpy
    } else {
      return FloatToInt<To>(static_cast<double>(Load(v)));
    }
  } else if constexpr (kIsHalf<To>) {
    return To(static_cast<float>(Load(v)));
  } else {
    return static_cast<To>(Load(v));
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

// A whole string as a double (strtod also takes "inf", "infinity", "nan").
bool ParseDouble(const std::string& text, double* out) {
  const std::string s(Trim(text));
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    const std::string_view s = Trim(text);
    if (IEquals(s, "true")) {
      *out = true;
      return true;
    }
    if (IEquals(s, "false")) {
      *out = false;
      return true;
    }
    double d = 0;
    if (!ParseDouble(text, &d)) return false;
    *out = d != 0;
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    const std::string s(Trim(text));
    if (s.empty()) return false;
    char* end = nullptr;
    errno = 0;
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (s[0] != '-') {
        const unsigned long long u = std::strtoull(s.c_str(), &end, 10);
        if (errno == 0 && end == s.c_str() + s.size()) {
          *out = static_cast<T>(u);
          return true;
        }
      }
    }
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end == s.c_str() + s.size()) {
      *out = static_cast<T>(v);
      return true;
    }
    double d = 0;  // "100.5", "1e3", out-of-range: through double
    if (!ParseDouble(s, &d)) return false;
    *out = FloatToInt<T>(d);
    return true;
  } else {
    double d = 0;
    if (!ParseDouble(text, &d)) return false;
    *out = Store<T>(d);
    return true;
  }
}

template <typename T>
std::string FormatNumber(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "1" : "0";
  } else if constexpr (std::is_integral_v<T>) {
    return fmt::format("{}", v);
  } else {
    const auto c = Load(v);
    if (std::isnan(c)) return "NaN";
    if (std::isinf(c)) return c > 0 ? "INF" : "-INF";
    std::string s;
    if constexpr (kIsHalf<T>) {
      // Shortest %g text that reads back as the same 16-bit value.
      for (int p = 1; p <= 9; ++p) {
        s = fmt::format("{:.{}g}", c, p);
        if (T(std::strtof(s.c_str(), nullptr)).bits == v.bits) break;
      }
    } else {
      s = fmt::format("{}", c);  // shortest round-trip (Python / numpy repr style)
    }
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
}

StatusOr<Array> CastArray(const OpContext& ctx, const Array& x, ElemType to) {
  if (to == x.type()) return x;
  Array out(to, x.shape());
  const int64_t n = x.numel();
  if (x.type() == ElemType::kString) {
    const std::string* src = x.data<std::string>();
    Status st = Status::Ok();
    TESSERA_RETURN_IF_ERROR(VisitNumeric(to, "Cast from string", [&](auto tag) {
      using T = decltype(tag);
      T* dst = out.data<T>();
      for (int64_t i = 0; i < n && st.ok(); ++i) {
        if (!ParseNumber<T>(src[i], &dst[i])) st = ctx.Error("cannot read '{}' as {}", src[i], ElemName(to));
      }
    }));
    if (!st.ok()) return st;
    return out;
  }
  if (to == ElemType::kString) {
    std::string* dst = out.data<std::string>();
    TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "Cast to string", [&](auto tag) {
      using T = decltype(tag);
      const T* src = x.data<T>();
      for (int64_t i = 0; i < n; ++i) dst[i] = FormatNumber(src[i]);
    }));
    return out;
  }
  TESSERA_RETURN_IF_ERROR(VisitNumeric(x.type(), "Cast", [&](auto ftag) {
    using From = decltype(ftag);
    const From* src = x.data<From>();
    TESSERA_CHECK_OK(VisitNumeric(to, "Cast", [&](auto ttag) {
      using To = decltype(ttag);
      To* dst = out.data<To>();
      for (int64_t i = 0; i < n; ++i) dst[i] = ConvertNumeric<From, To>(src[i]);
    }));
  }));
  return out;
}

Status Cast(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (!ctx.node().Has("to")) return ctx.Error("attribute 'to' is required");
  TESSERA_ASSIGN_OR_RETURN(int64_t to, ctx.node().Int("to", 0));
  auto type = ElemTypeFromProto(static_cast<int32_t>(to));
  if (!type.ok() || to != static_cast<int32_t>(to) || *type == ElemType::kUndefined) {
    return ctx.Error("unsupported target type to={}", to);
  }
  TESSERA_ASSIGN_OR_RETURN(Array y, CastArray(ctx, x, *type));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

Status CastLike(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  TESSERA_ASSIGN_OR_RETURN(Array like, ctx.tensor(1));
  TESSERA_ASSIGN_OR_RETURN(Array y, CastArray(ctx, x, like.type()));
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void RegisterCastOps(OpRegistry& r) {
  r.Register("Cast", Cast);
  r.Register("CastLike", CastLike);
}

}  // namespace tessera::onnx::elementwise

// StringNormalizer: drops stopwords (case-sensitively or not) from a [C] or
// [1, C] string tensor and optionally lower- / upper-cases the rest (ASCII).
#include <algorithm>
#include <cctype>
#include <set>

#include "tessera/onnx/ops/misc/misc_kernels.h"

namespace tessera::onnx {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Status StringNormalizerKernel(OpContext& ctx) {
  TESSERA_ASSIGN_OR_RETURN(Array x, ctx.tensor(0));
  if (x.type() != ElemType::kString) return ctx.Error("input must be a string tensor, got {}", ElemName(x.type()));
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1))) {
    return ctx.Error("input must be [C] or [1, C], got {}", x.ShapeString());
  }
  TESSERA_ASSIGN_OR_RETURN(std::string action, ctx.node().String("case_change_action", "NONE"));
  TESSERA_ASSIGN_OR_RETURN(int64_t case_sensitive, ctx.node().Int("is_case_sensitive", 0));
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> stopwords, ctx.node().Strings("stopwords", {}));
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    return ctx.Error("case_change_action must be NONE, LOWER or UPPER, got '{}'", action);
  }
  std::set<std::string> stop;
  for (const std::string& w : stopwords) stop.insert(case_sensitive != 0 ? w : Lower(w));
  std::vector<std::string> kept;
  const std::string* in = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (stop.count(case_sensitive != 0 ? in[i] : Lower(in[i])) > 0) continue;
    kept.push_back(action == "LOWER" ? Lower(in[i]) : action == "UPPER" ? Upper(in[i]) : in[i]);
  }
  if (kept.empty()) kept.emplace_back();  // ONNX: an all-stopword input gives one empty string
  const int64_t c = static_cast<int64_t>(kept.size());
  Array out(ElemType::kString, x.rank() == 1 ? std::vector<int64_t>{c} : std::vector<int64_t>{1, c});
  std::copy(kept.begin(), kept.end(), out.data<std::string>());
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace tessera::onnx

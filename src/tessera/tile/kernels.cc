// The kernel registry (see kernels.h): the per-ISA tables in preference
// order, the default per GEMM type (TESSERA_GEMM_ISA restricts the ISA
// family), lookup by name.
#include "tessera/tile/kernels.h"

#include <array>
#include <string>

#include "tessera/base/knobs.h"
#include "tessera/base/logging.h"

namespace tessera::tile {
namespace {

base::Knob<std::string> kGemmIsaKnob("TESSERA_GEMM_ISA", "auto",
                                     "GEMM micro-kernel ISA family: auto (best the CPU supports), avx512, avx2 "
                                     "or portable");

std::array<const KernelInfo*, 3> g_override = {nullptr, nullptr, nullptr};

int Index(GemmType type) { return static_cast<int>(type); }

bool InFamily(const KernelInfo& k, const std::string& family) {
  if (family == "auto") return true;
  return std::string_view(k.isa).substr(0, family.size()) == family;
}

const KernelInfo* ChooseDefault(GemmType type) {
  std::string family = kGemmIsaKnob.Get();
  if (family != "auto" && family != "avx512" && family != "avx2" && family != "portable") {
    TLOG(WARN, "TESSERA_GEMM_ISA={} is not one of auto, avx512, avx2, portable; using auto", family);
    family = "auto";
  }
  const KernelInfo* chosen = nullptr;
  for (const KernelInfo* k : AllKernels()) {
    if (k->type == type && InFamily(*k, family) && k->supported()) {
      chosen = k;
      break;
    }
  }
  if (chosen == nullptr) {  // the family is not supported here: the best that is
    for (const KernelInfo* k : AllKernels()) {
      if (k->type == type && k->supported()) {
        chosen = k;
        break;
      }
    }
    TLOG(WARN, "TESSERA_GEMM_ISA={}: no {} kernel of that family runs on this CPU; using {}", family,
         GemmTypeName(type), chosen->name);
  }
  TLOG(INFO, "gemm: {} uses {} by default (TESSERA_GEMM_ISA={})", GemmTypeName(type), chosen->name, family);
  return chosen;
}

}  // namespace

const char* GemmTypeName(GemmType type) {
  switch (type) {
    case GemmType::kF32:
      return "f32";
    case GemmType::kBf16F32:
      return "bf16f32";
    case GemmType::kU8S8S32:
      return "u8s8s32";
  }
  return "?";
}

const std::vector<const KernelInfo*>& AllKernels() {
  static const std::vector<const KernelInfo*> all = [] {
    std::vector<const KernelInfo*> v;
    for (auto table : {Avx512Kernels(), Avx2Kernels(), PortableKernels()}) v.insert(v.end(), table.begin(), table.end());
    return v;
  }();
  return all;
}

const KernelInfo& DefaultKernel(GemmType type) {
  if (const KernelInfo* k = g_override[Index(type)]; k != nullptr) return *k;
  static const std::array<const KernelInfo*, 3> chosen = {ChooseDefault(GemmType::kF32),
                                                          ChooseDefault(GemmType::kBf16F32),
                                                          ChooseDefault(GemmType::kU8S8S32)};
  return *chosen[Index(type)];
}

std::vector<const KernelInfo*> SupportedKernels(GemmType type) {
  const KernelInfo& first = DefaultKernel(type);
  std::vector<const KernelInfo*> out = {&first};
  for (const KernelInfo* k : AllKernels()) {
    if (k != &first && k->type == type && k->supported() && std::string_view(k->numerics) == first.numerics &&
        k->kc == first.kc) {
      out.push_back(k);
    }
  }
  return out;
}

const KernelInfo* FindKernel(std::string_view name) {
  for (const KernelInfo* k : AllKernels()) {
    if (name == k->name) return k->supported() ? k : nullptr;
  }
  return nullptr;
}

void SetDefaultKernelForTesting(GemmType type, const KernelInfo* kernel) { g_override[Index(type)] = kernel; }

}  // namespace tessera::tile

#include "tessera/hal/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

namespace tessera::hal {
namespace {

struct Regs {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// cpuid(leaf, subleaf), or zeros when the leaf is beyond the maximum.
Regs Cpuid(uint32_t leaf, uint32_t subleaf = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Regs{};
  return r;
}

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

uint64_t Xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string Trim(std::string s) {
  const char* ws = " \t\n\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(ws);
  s = s.substr(b, e - b + 1);
  // Collapse runs of spaces (some brand strings are padded inside).
  std::string out;
  for (char c : s) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  return out;
}

CpuFeatures Detect() {
  CpuFeatures f;
  Regs r0 = Cpuid(0);
  const uint32_t max_leaf = r0.eax;
  char vendor[13] = {};
  std::memcpy(vendor + 0, &r0.ebx, 4);
  std::memcpy(vendor + 4, &r0.edx, 4);
  std::memcpy(vendor + 8, &r0.ecx, 4);
  f.vendor = vendor;

  Regs r1 = Cpuid(1);
  const int base_family = static_cast<int>((r1.eax >> 8) & 0xf);
  const int base_model = static_cast<int>((r1.eax >> 4) & 0xf);
  f.family = base_family == 0xf ? base_family + static_cast<int>((r1.eax >> 20) & 0xff) : base_family;
  f.model = (base_family == 0x6 || base_family == 0xf) ? (static_cast<int>((r1.eax >> 16) & 0xf) << 4) + base_model
                                                       : base_model;
  f.stepping = static_cast<int>(r1.eax & 0xf);

  const bool osxsave = Bit(r1.ecx, 27);
  const uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;            // XMM + YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM_Hi256 + Hi16_ZMM
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;    // XTILECFG + XTILEDATA

  f.sse4_2 = Bit(r1.ecx, 20);
  f.avx = os_avx && Bit(r1.ecx, 28);
  f.fma = os_avx && Bit(r1.ecx, 12);
  f.f16c = os_avx && Bit(r1.ecx, 29);

  if (max_leaf >= 7) {
    Regs r7 = Cpuid(7, 0);
    Regs r7_1 = Cpuid(7, 1);
    f.avx2 = os_avx && Bit(r7.ebx, 5);
    f.avx512f = os_avx512 && Bit(r7.ebx, 16);
    f.avx512dq = os_avx512 && Bit(r7.ebx, 17);
    f.avx512cd = os_avx512 && Bit(r7.ebx, 28);
    f.avx512bw = os_avx512 && Bit(r7.ebx, 30);
    f.avx512vl = os_avx512 && Bit(r7.ebx, 31);
    f.avx512_vnni = os_avx512 && Bit(r7.ecx, 11);
    f.avx512_fp16 = os_avx512 && Bit(r7.edx, 23);
    f.amx_bf16 = os_amx && Bit(r7.edx, 22);
    f.amx_tile = os_amx && Bit(r7.edx, 24);
    f.amx_int8 = os_amx && Bit(r7.edx, 25);
    f.avx_vnni = os_avx && Bit(r7_1.eax, 4);
    f.avx512_bf16 = os_avx512 && Bit(r7_1.eax, 5);
  }

  if (Cpuid(0x80000000).eax >= 0x80000004) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      Regs r = Cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i + 0, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    f.model_name = Trim(brand);
  }
  if (f.model_name.empty()) f.model_name = f.vendor.empty() ? "unknown CPU" : f.vendor;
  return f;
}

}  // namespace

std::vector<std::string> CpuFeatures::Names() const {
  const std::pair<const char*, bool> kAll[] = {
      {"sse4.2", sse4_2},          {"avx", avx},
      {"avx2", avx2},              {"fma", fma},
      {"f16c", f16c},              {"avx512f", avx512f},
      {"avx512bw", avx512bw},      {"avx512vl", avx512vl},
      {"avx512dq", avx512dq},      {"avx512cd", avx512cd},
      {"avx512_bf16", avx512_bf16}, {"avx512_vnni", avx512_vnni},
      {"avx512_fp16", avx512_fp16}, {"avx_vnni", avx_vnni},
      {"amx_tile", amx_tile},      {"amx_bf16", amx_bf16},
      {"amx_int8", amx_int8},
  };
  std::vector<std::string> out;
  for (const auto& [name, present] : kAll) {
    if (present) out.emplace_back(name);
  }
  return out;
}

std::string CpuFeatures::ToString() const {
  std::string out;
  for (const std::string& n : Names()) {
    if (!out.empty()) out += ' ';
    out += n;
  }
  return out;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

}  // namespace tessera::hal

// CPU identification and ISA features of the machine we run on, read once
// with cpuid (and xgetbv, so a feature counts only when the OS also saves
// its register state). Kernels select AVX-512 / AVX2 / scalar variants from
// these flags at run time, since the binaries are built for x86-64-v3.
// AMX flags say the CPU and OS (XCR0) support the tiles; on Linux a process
// must still request permission (arch_prctl ARCH_REQ_XCOMP_PERM) before
// using them, which Tessera does not do yet. Immutable after first use;
// thread-safe.
#pragma once

#include <string>
#include <vector>

namespace tessera::hal {

struct CpuFeatures {
  std::string vendor;      // "GenuineIntel", "AuthenticAMD", ...
  std::string model_name;  // brand string, trimmed, e.g. "AMD EPYC 9R45"
  int family = 0;          // display family / model (base + extended)
  int model = 0;
  int stepping = 0;

  bool sse4_2 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512cd = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // The AVX-512 subset Tessera's kernels need (F, BW, VL, DQ).
  bool HasAvx512Core() const { return avx512f && avx512bw && avx512vl && avx512dq; }
  // Names of the features present, in a fixed order ("sse4.2", "avx2", ...).
  std::vector<std::string> Names() const;
  // "sse4.2 avx avx2 fma ..." (space separated).
  std::string ToString() const;
};

// Detected once per process.
const CpuFeatures& GetCpuFeatures();

}  // namespace tessera::hal

#include "base/cpu_isa.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "distflow/logging.h"
#include "distflow/version.h"

#ifndef DISTFLOW_ARCH_FLAGS_STRING
#define DISTFLOW_ARCH_FLAGS_STRING "(unknown)"
#endif

namespace distflow {
namespace {

// The widest variant this CPU (and its OS, for the AVX register state) runs.
// The tests match the target lists in kernels/cpu/isa_dispatch.h.
CpuIsa DetectCpuIsa() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return CpuIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuIsa::kAvx2;
#endif
  return CpuIsa::kBaseline;
}

CpuIsa ChooseKernelIsa() {
  const CpuIsa cpu = DetectCpuIsa();
  const char* env = std::getenv("DISTFLOW_KERNEL_ISA");
  if (env == nullptr || *env == '\0') return cpu;
  CpuIsa wanted;
  if (std::strcmp(env, "baseline") == 0) {
    wanted = CpuIsa::kBaseline;
  } else if (std::strcmp(env, "avx2") == 0) {
    wanted = CpuIsa::kAvx2;
  } else if (std::strcmp(env, "avx512") == 0) {
    wanted = CpuIsa::kAvx512;
  } else {
    DF_LOG(WARNING) << "DISTFLOW_KERNEL_ISA='" << env << "' is not one of baseline, avx2, avx512; using "
                    << CpuIsaName(cpu) << ", the widest this CPU supports";
    return cpu;
  }
  if (static_cast<int>(wanted) > static_cast<int>(cpu)) {
    DF_LOG(WARNING) << "DISTFLOW_KERNEL_ISA=" << env << " asks for more than this CPU supports; using "
                    << CpuIsaName(cpu);
    return cpu;
  }
  return wanted;
}

}  // namespace

bool KernelIsaDispatched() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
  return true;
#else
  return false;
#endif
}

CpuIsa KernelIsa() {
  static const CpuIsa isa = ChooseKernelIsa();
  return isa;
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kBaseline:
      break;
  }
  return "baseline";
}

std::string KernelIsaSummary() {
  if (!KernelIsaDispatched()) {
    return absl::StrCat("kernels: built for one CPU type (", DISTFLOW_ARCH_FLAGS_STRING,
                        "), no runtime dispatch; this CPU supports ", CpuIsaName(DetectCpuIsa()));
  }
  return absl::StrCat("kernels: ", CpuIsaName(KernelIsa()), " (runtime dispatch; library built with ",
                      DISTFLOW_ARCH_FLAGS_STRING, "; this CPU supports ", CpuIsaName(DetectCpuIsa()), ")");
}

}  // namespace distflow

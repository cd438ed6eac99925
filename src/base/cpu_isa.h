// Which instruction-set variant the hot kernel loops run (runtime dispatch).
//
// The shipped library is compiled for a portable baseline (x86-64-v2, see
// cmake/Flags.cmake); the few loops that gain from wider vectors are also
// compiled for AVX2 and AVX-512 (kernels/cpu/isa_dispatch.h) and the variant
// is chosen once per process from what the CPU supports. DISTFLOW_KERNEL_ISA
// (baseline, avx2 or avx512) caps the choice, e.g. to compare variants or to
// test the baseline on a newer machine. All functions are thread-safe.
#pragma once

namespace distflow {

enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// True when the library carries per-ISA variants (an x86-64 build for a
// baseline below AVX2); false when it was compiled for one CPU
// (-march=native or similar), in which case every loop runs that code.
bool KernelIsaDispatched();

// The variant the dispatched loops run in this process, chosen on first use.
CpuIsa KernelIsa();

// "baseline", "avx2" or "avx512".
const char* CpuIsaName(CpuIsa isa);

// KernelIsaSummary(), the one-line description, is public: distflow/version.h.

}  // namespace distflow

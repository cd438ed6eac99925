// Runtime instruction-set dispatch for the hot element-wise kernel loops.
//
// The library is compiled for a portable baseline (x86-64-v2); a loop that
// gains from AVX2 or AVX-512 is written once as an always-inline function
// template and run through DispatchIsa, which instantiates it inside three
// functions compiled with different `target` attributes (baseline, AVX2+FMA,
// AVX-512) and calls the one base/cpu_isa.h chose for this CPU at start-up:
//
//   template <typename T>
//   DISTFLOW_ISA_INLINE void AddLoop(const T* __restrict a, T* __restrict b, int64_t n) {...}
//   DispatchIsa<AddLoop<float>>(a, b, n);
//
// Only plain loops gain: Eigen picks its packet width from the compiler's
// macros, which a `target` attribute does not change. The loop body must
// inline completely (hence always_inline), so it may call only inline code.
// A build for one CPU (-march=native, or any baseline with AVX2) has no
// variants: DispatchIsa calls the loop directly. Stateless; thread-safe.
#pragma once

#include "base/cpu_isa.h"

#define DISTFLOW_ISA_INLINE __attribute__((always_inline)) inline

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__)
#define DISTFLOW_ISA_DISPATCH 1
#else
#define DISTFLOW_ISA_DISPATCH 0
#endif

namespace distflow {
namespace isa_internal {

#if DISTFLOW_ISA_DISPATCH
template <auto Loop, typename... Args>
__attribute__((noinline, target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2,f16c,lzcnt,popcnt"))) void
RunAvx512(Args... args) {
  Loop(args...);
}
template <auto Loop, typename... Args>
__attribute__((noinline, target("avx2,fma,bmi,bmi2,f16c,lzcnt,popcnt"))) void RunAvx2(Args... args) {
  Loop(args...);
}
template <auto Loop, typename... Args>
__attribute__((noinline)) void RunBaseline(Args... args) {
  Loop(args...);
}
#endif

}  // namespace isa_internal

// Runs Loop(args...) compiled for the instruction set KernelIsa() chose.
template <auto Loop, typename... Args>
inline void DispatchIsa(Args... args) {
#if DISTFLOW_ISA_DISPATCH
  static const CpuIsa isa = KernelIsa();
  switch (isa) {
    case CpuIsa::kAvx512:
      isa_internal::RunAvx512<Loop>(args...);
      return;
    case CpuIsa::kAvx2:
      isa_internal::RunAvx2<Loop>(args...);
      return;
    case CpuIsa::kBaseline:
      break;
  }
  isa_internal::RunBaseline<Loop>(args...);
#else
  Loop(args...);
#endif
}

}  // namespace distflow

// The version of the distflow library a program runs with (which may be
// newer than the headers it was built against, within one major version).
#pragma once
#include <string>

#include "distflow/export.h"

namespace distflow {

// "MAJOR.MINOR.PATCH".
DISTFLOW_EXPORT const char* Version();

// Which instruction-set variant the library's hot kernel loops run in this
// process and why, in one line for logs, e.g. "kernels: avx2 (runtime
// dispatch; library built with -march=x86-64-v2; this CPU supports avx2)".
// The variant is chosen once, from the CPU; DISTFLOW_KERNEL_ISA=baseline,
// avx2 or avx512 caps it. oneDNN (convolutions, matmul) dispatches on its own.
DISTFLOW_EXPORT std::string KernelIsaSummary();

}  // namespace distflow

// ScopedFlushDenormal: while alive, the calling thread treats denormal floats
// as zero (x86 FTZ and DAZ). Arithmetic on denormals is up to a hundred
// times slower, and training produces them (tiny gradients); TensorFlow's
// executor flushes them the same way. Restores the previous mode on exit.
#pragma once

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace distflow {

class ScopedFlushDenormal {
 public:
  ScopedFlushDenormal() {
#if defined(__SSE__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#endif
  }
  ~ScopedFlushDenormal() {
#if defined(__SSE__)
    _mm_setcsr(saved_);
#endif
  }
  ScopedFlushDenormal(const ScopedFlushDenormal&) = delete;
  ScopedFlushDenormal& operator=(const ScopedFlushDenormal&) = delete;

 private:
  unsigned int saved_ = 0;
};

}  // namespace distflow

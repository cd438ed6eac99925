// Which threads may run a step's expensive kernels (executor.cc): the
// inter-op pool's and a caller waiting in Run, and threads marked here: a
// pool of ours whose closure may block for a while anyway (the bulk
// transfer pool, rpc/worker_cache.cc). An asynchronous kernel that
// completes on such a thread (a _Recv whose bytes it just read) continues
// the step there with the first expensive successor (the update that
// consumes a received gradient) instead of waking an inter-op thread and
// going to sleep: one hand-off fewer on the step's critical path. Threads we
// do not own (gRPC's) stay unmarked and run cheap successors only.
#pragma once

namespace distflow {

namespace kernel_threads_internal {
inline thread_local bool may_run_long_kernels = false;
}  // namespace kernel_threads_internal

inline bool MayRunLongKernelsHere() { return kernel_threads_internal::may_run_long_kernels; }

// Marks the calling thread for its lifetime in scope.
class ScopedLongKernelsAllowed {
 public:
  ScopedLongKernelsAllowed() : was_(kernel_threads_internal::may_run_long_kernels) {
    kernel_threads_internal::may_run_long_kernels = true;
  }
  ~ScopedLongKernelsAllowed() { kernel_threads_internal::may_run_long_kernels = was_; }
  ScopedLongKernelsAllowed(const ScopedLongKernelsAllowed&) = delete;
  ScopedLongKernelsAllowed& operator=(const ScopedLongKernelsAllowed&) = delete;

 private:
  const bool was_;
};

}  // namespace distflow

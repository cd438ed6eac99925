// A fixed-size pool of worker threads that run closures in FIFO order.
//
// The pool owns its threads and joins them in its destructor, after running
// every closure already scheduled. Thread-safe: Schedule may be called from any
// thread, including from inside a closure running on the pool.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace distflow {

class ThreadPool {
 public:
  // `name` is used in thread names for debuggers; `num_threads` >= 1.
  ThreadPool(std::string name, int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);

  // Runs fn(i) for i in [0, n), split into at most NumThreads()+1 contiguous
  // blocks; the calling thread runs one block itself. Returns when all are done.
  // fn(begin, end) is called once per block.
  void ParallelFor(int64_t n, int64_t min_block, const std::function<void(int64_t, int64_t)>& fn);

  int NumThreads() const { return static_cast<int>(threads_.size()); }

  // True if the calling thread belongs to this pool.
  bool InPool() const;

 private:
  void WorkerLoop();

  const std::string name_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Cores this process may use (affinity, cgroup quota: base/cpu_budget.h), >= 1.
int NumSchedulableCpus();

}  // namespace distflow

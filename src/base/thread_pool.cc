#include "base/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "base/cpu_budget.h"
#include "base/denormal.h"
#include "base/logging.h"

namespace distflow {
namespace {
thread_local const ThreadPool* current_pool = nullptr;
}  // namespace

ThreadPool::ThreadPool(std::string name, int num_threads) : name_(std::move(name)) {
  CHECK(num_threads >= 1) << "ThreadPool '" << name_ << "' needs at least one thread";
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
    std::string tname = (name_ + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), tname.c_str());
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

bool ThreadPool::InPool() const { return current_pool == this; }

void ThreadPool::WorkerLoop() {
  current_pool = this;
  ScopedFlushDenormal flush;  // intra-op work runs here too
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t min_block, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  min_block = std::max<int64_t>(min_block, 1);
  int64_t max_blocks = InPool() ? 1 : NumThreads() + 1;
  int64_t blocks = std::min<int64_t>(max_blocks, (n + min_block - 1) / min_block);
  if (blocks <= 1) {
    fn(0, n);
    return;
  }
  int64_t per = (n + blocks - 1) / blocks;
  blocks = (n + per - 1) / per;
  absl::BlockingCounter done(static_cast<int>(blocks - 1));
  for (int64_t b = 1; b < blocks; ++b) {
    int64_t begin = b * per, end = std::min(n, begin + per);
    Schedule([&fn, &done, begin, end] {
      fn(begin, end);
      done.DecrementCount();
    });
  }
  fn(0, std::min(n, per));
  done.Wait();
}

int NumSchedulableCpus() { return AvailableCpus(); }

}  // namespace distflow

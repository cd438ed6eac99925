#include "base/thread_pool.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(ThreadPool, RunsEveryScheduledClosureBeforeDestruction) {
  std::atomic<int> count{0};
  {
    ThreadPool pool("test", 3);
    for (int i = 0; i < 1000; ++i) pool.Schedule([&] { count.fetch_add(1); });
  }  // destructor drains and joins
  EXPECT_EQ(count.load(), 1000);
}

TEST(ThreadPool, ClosuresMayScheduleMore) {
  std::atomic<int> count{0};
  absl::BlockingCounter done(10);
  ThreadPool pool("nest", 2);
  for (int i = 0; i < 5; ++i) {
    pool.Schedule([&] {
      count.fetch_add(1);
      done.DecrementCount();
      pool.Schedule([&] {
        count.fetch_add(1);
        done.DecrementCount();
      });
    });
  }
  done.Wait();
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPool, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool("pfor", 2);
  for (int64_t n : {0, 1, 7, 100, 12345}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.ParallelFor(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPool, ParallelForInsidePoolDoesNotDeadlock) {
  ThreadPool pool("inner", 1);
  absl::BlockingCounter done(1);
  std::atomic<int64_t> sum{0};
  pool.Schedule([&] {
    pool.ParallelFor(100, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    done.DecrementCount();
  });
  done.Wait();
  EXPECT_EQ(sum.load(), 4950);
}

TEST(ThreadPool, NumSchedulableCpusIsPositive) { EXPECT_GE(NumSchedulableCpus(), 1); }

}  // namespace
}  // namespace distflow

#include "base/cpu_budget.h"

#include <sched.h>

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(CpuBudget, CgroupV2MaxWithoutLimitIsZero) { EXPECT_EQ(CpusFromCgroupV2Max("max 100000\n"), 0); }

TEST(CpuBudget, CgroupV2QuotaRoundsUp) {
  EXPECT_EQ(CpusFromCgroupV2Max("200000 100000\n"), 2);
  EXPECT_EQ(CpusFromCgroupV2Max("150000 100000"), 2);
  EXPECT_EQ(CpusFromCgroupV2Max("50000 100000"), 1);
}

TEST(CpuBudget, CgroupV2MalformedLineIsNoLimit) {
  EXPECT_EQ(CpusFromCgroupV2Max(""), 0);
  EXPECT_EQ(CpusFromCgroupV2Max("lots 100000"), 0);
  EXPECT_EQ(CpusFromCgroupV2Max("100000"), 0);
  EXPECT_EQ(CpusFromCgroupV2Max("100000 0"), 0);
}

TEST(CpuBudget, CgroupV1NegativeQuotaIsNoLimit) {
  EXPECT_EQ(CpusFromCgroupV1(-1, 100000), 0);
  EXPECT_EQ(CpusFromCgroupV1(300000, 100000), 3);
  EXPECT_EQ(CpusFromCgroupV1(250000, 100000), 3);
}

TEST(CpuBudget, AvailableCpusWithinAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int n = AvailableCpus();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, CPU_COUNT(&set));
}

TEST(CpuBudget, ThreadsPerTaskSharesCpus) {
  EXPECT_EQ(ThreadsPerTask(2, 4), 1);  // the README's cluster on two cores
  EXPECT_EQ(ThreadsPerTask(8, 4), 2);
  EXPECT_EQ(ThreadsPerTask(8, 3), 2);
  EXPECT_EQ(ThreadsPerTask(4, 1), 4);
  EXPECT_EQ(ThreadsPerTask(4, 0), 4);
}

}  // namespace
}  // namespace distflow

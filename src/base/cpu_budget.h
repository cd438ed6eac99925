// How many CPUs this process may use, and how many threads each task of a
// cluster sharing one machine should compute with, so that several tasks on
// few cores do not oversubscribe them (four single-threaded tasks on two
// cores already queue; four two-threaded ones, each OpenMP team spinning at
// its barriers while the others hold the cores, collapse).
//
// AvailableCpus() is the smallest of the CPUs in the process's affinity mask
// (sched_getaffinity) and its cgroup's CPU quota (cgroup v2 `cpu.max` of its
// cgroup and every ancestor, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`),
// rounded up; at least 1. The parsers are exposed for tests. Thread-safe
// (reads files; no state).
#pragma once

#include <cstdint>
#include <string>

namespace distflow {

int AvailableCpus();

// CPUs a cgroup v2 `cpu.max` line allows ("max 100000": 0, no limit;
// "150000 100000": 2, i.e. 1.5 rounded up). 0 for no limit or a line that
// cannot be parsed.
int CpusFromCgroupV2Max(const std::string& cpu_max);
// The same for cgroup v1: quota -1 (or <= 0) is no limit.
int CpusFromCgroupV1(int64_t quota_us, int64_t period_us);

// Compute threads for one of `tasks_on_host` tasks sharing `cpus`: an equal
// share, at least 1.
int ThreadsPerTask(int cpus, int tasks_on_host);

}  // namespace distflow

// Same-host shared memory between real processes: a ps and a worker, each
// a distflow-server process with the cluster token, and a client in this
// process. The worker's pull of a 12 MiB ps tensor goes through shared memory
// (the ps's /metrics says so) unless DISTFLOW_SHM=0, and /dev/shm is the
// same after the tasks are gone.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "server/grpc_session.h"
#include "subprocess.h"

namespace distflow {
namespace {

using subprocess::FreePort;
using subprocess::MetricValue;
using subprocess::Output;
using subprocess::Proc;
using subprocess::ScrapeMetrics;
using subprocess::Spawn;
using subprocess::Wait;

// /dev/shm's entries, leaving out POSIX named semaphores ("sem.*"): distflow
// makes none, and other programs on the machine (Python's multiprocessing in
// a test running beside this one) create and remove them at any time.
std::set<std::string> DevShm() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string_view(e->d_name).starts_with("sem.")) continue;
      names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

TEST(SharedMemoryProcesses, APsPullBetweenTwoServerProcessesGoesThroughSharedMemoryUnlessOff) {
  setenv("DISTFLOW_AUTH_TOKEN", "shm-process-token", 1);  // this process is a client of the cluster
  RegisterGrpcSessionFactory();
  const std::set<std::string> before = DevShm();
  for (const bool off : {false, true}) {
    SCOPED_TRACE(off ? "DISTFLOW_SHM=0" : "shared memory on");
    const int ps_port = FreePort(), worker_port = FreePort(), status_port = FreePort(), worker_status = FreePort();
    const std::string spec = absl::StrCat("--cluster_spec=ps|127.0.0.1:", ps_port, ",worker|127.0.0.1:", worker_port);
    std::vector<std::string> env = {"DISTFLOW_AUTH_TOKEN=shm-process-token"};
    if (off) env.push_back("DISTFLOW_SHM=0");
    Proc ps = Spawn(
        {DISTFLOW_SERVER_BIN, spec, "--job_name=ps", "--task_index=0", absl::StrCat("--status_port=", status_port)},
        env);
    Proc worker = Spawn({DISTFLOW_SERVER_BIN, spec, "--job_name=worker", "--task_index=0",
                         absl::StrCat("--status_port=", worker_status)},
                        env);
    const int64_t n = (int64_t{3} << 20) + 5;
    {
      Scope root = Scope::NewRootScope();
      auto ramp = ops::Range(root.WithDevice("/job:ps/task:0"), ops::Const(root, 0.f),
                             ops::Const(root, static_cast<float>(n)), ops::Const(root, 1.f));
      auto tail = ops::Slice(root.WithDevice("/job:worker/task:0"), ramp, {n - 2}, {2});
      SessionOptions o;
      o.wait_for_cluster_ms = 60000;
      Session sess(absl::StrCat("grpc://127.0.0.1:", worker_port), o);
      auto out = sess.Run({tail});
      ASSERT_TRUE(out.ok()) << out.status() << "\n" << Output(ps) << Output(worker);
      EXPECT_EQ((*out)[0].flat<float>()[1], static_cast<float>(n - 1));
    }
    const std::string page = ScrapeMetrics(status_port);
    const std::string task = "{task=\"/job:ps/replica:0/task:0\"}";
    const double bytes = static_cast<double>(n) * 4;
    EXPECT_EQ(MetricValue(page, "distflow_bulk_bytes_served_total" + task), bytes) << page;
    EXPECT_EQ(MetricValue(page, "distflow_bulk_shm_bytes_served_total" + task), off ? 0 : bytes) << page;
    if (!off) {
      // The ps's tensor lay in a shared block: the worker copied it once,
      // out of its mapping of the block, and nobody copied it into the ring.
      const std::string worker_page = ScrapeMetrics(worker_status);
      EXPECT_EQ(MetricValue(worker_page, "distflow_bytes_copied_total{what=\"shm_mapped\"}"), bytes) << worker_page;
      EXPECT_LE(MetricValue(page, "distflow_bytes_copied_total{what=\"shm_ring\"}"), 0) << page;
    }
    kill(worker.pid, SIGKILL);  // no clean exit: the kernel frees the segments
    kill(ps.pid, SIGKILL);
    EXPECT_EQ(Wait(worker, 30), 128 + SIGKILL);
    EXPECT_EQ(Wait(ps, 30), 128 + SIGKILL);
    EXPECT_EQ(DevShm(), before) << "/dev/shm changed";
  }
}

}  // namespace
}  // namespace distflow

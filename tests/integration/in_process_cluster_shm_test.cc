// in_process_cluster_test: between tasks of one host a large tensor travels
// through shared memory (bulk/shm_channel.h) unless it is turned off, and a
// scraper of the ps's /metrics sees which way it went.
#include <cstdlib>
#include <string>

#include "in_process_cluster_test.h"
#include "subprocess.h"

namespace distflow {
namespace cluster_test {
namespace {

using subprocess::MetricValue;
using subprocess::ScrapeMetrics;

// A worker's pull of a ps tensor on one host: through shared memory by
// default (the ps's bulk port counts it as such, and /metrics says so), over
// TCP with ServerOptions::shared_memory off or DISTFLOW_SHM=0. The tensor is
// the same either way.
TEST(Cluster, APsPullOnOneHostGoesThroughSharedMemoryUnlessTurnedOff) {
  for (const char* how : {"on", "option off", "DISTFLOW_SHM=0"}) {
    SCOPED_TRACE(how);
    const bool shm = std::string(how) == "on";
    if (std::string(how) == "DISTFLOW_SHM=0") setenv("DISTFLOW_SHM", "0", 1);
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok());
    ServerOptions options;
    options.shared_memory = std::string(how) != "option off";
    options.status_port = 0;
    auto servers = StartLocalCluster(*spec, options);
    ASSERT_TRUE(servers.ok()) << servers.status();
    Server* ps = nullptr;
    Server* worker = nullptr;
    for (auto& s : *servers) (s->task_name() == "/job:ps/replica:0/task:0" ? ps : worker) = s.get();
    const int64_t n = (int64_t{3} << 20) + 5;  // 12 MiB and a bit: several rings' worth, not a multiple
    Scope root = Scope::NewRootScope();
    auto ramp = ops::Range(root.WithDevice("/job:ps/task:0"), ops::Const(root, 0.f), ops::Const(root, float(n)),
                           ops::Const(root, 1.f));
    auto pulled = ops::Identity(root.WithDevice("/job:worker/task:0"), ramp);
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    Session sess(worker->target(), o);
    auto out = sess.Run({pulled});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].NumElements(), n);
    const float* q = static_cast<const float*>((*out)[0].raw_data());
    for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(q[i], static_cast<float>(i)) << i;
    EXPECT_EQ(q[n - 1], static_cast<float>(n - 1));
    const uint64_t bytes = static_cast<uint64_t>(n) * 4;
    EXPECT_EQ(ps->impl()->bulk_bytes_served(), bytes) << "the pull leaves over the ps's bulk port";
    EXPECT_EQ(ps->impl()->bulk_shm_bytes_served(), shm ? bytes : 0u) << "through shared memory iff it is on";
    // As a scraper sees it on the ps's /metrics.
    const std::string page = ScrapeMetrics(ps->status_port());
    const std::string task = "{task=\"/job:ps/replica:0/task:0\"}";
    EXPECT_EQ(MetricValue(page, "distflow_bulk_bytes_served_total" + task), static_cast<double>(bytes)) << page;
    EXPECT_EQ(MetricValue(page, "distflow_bulk_shm_bytes_served_total" + task), shm ? static_cast<double>(bytes) : 0)
        << page;
    unsetenv("DISTFLOW_SHM");
  }
}

}  // namespace
}  // namespace cluster_test
}  // namespace distflow

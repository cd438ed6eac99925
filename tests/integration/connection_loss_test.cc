// A client whose connection to its master breaks in the middle of a step:
// the client retries the RunStep with the same request id on a new
// connection, and the master answers it from the first attempt, so the step
// runs once and the client still gets its result. The break is made by a
// TCP proxy in this process between the client and the master (127.0.0.1).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/wait_until.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "server/grpc_server.h"
#include "tcp_proxy.h"
#include "worker/worker.h"

namespace distflow {
namespace {

TEST(ConnectionLoss, AStepWhoseConnectionBreaksIsRetriedAndRunsOnce) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok());
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server* worker = nullptr;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") worker = s.get();
  ASSERT_NE(worker, nullptr);
  TcpProxy proxy(worker->port());
  ASSERT_GT(proxy.port(), 0);

  // A counter on the ps incremented by a step that waits, on the worker, at
  // a barrier the test releases: the connection breaks while the step
  // certainly runs, and the retry must wait for it, on any machine.
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto w = root.WithDevice("/job:worker/task:0");
  auto counter = ops::MakeVariable(ps.WithOpName("counter"), ops::Const(ps, int64_t{0}));
  // The barrier holds a step fed 0 until its own step is set to something else.
  const ops::Attrs barrier{{"shared_name", "hold"}};
  auto arm = ops::Raw(w, "SyncBarrierRelease", {ops::Const(w, int64_t{0})}, barrier);
  auto release = ops::Raw(w, "SyncBarrierRelease", {ops::Const(w, int64_t{1})}, barrier);
  auto hold = ops::Raw(w, "SyncBarrierWait", {ops::Const(w, int64_t{0})},
                       ops::Attrs{{"shared_name", "hold"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 1},
                                  {"total_num_replicas", 1},
                                  {"timeout_ms", 300000}});
  auto incr = ops::AssignAdd(ps.WithControlDependencies({hold}), counter, ops::Const(ps, int64_t{1}));
  auto init = ops::GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = false;  // through the proxy, as a client on another machine
  Session sess("grpc://127.0.0.1:" + std::to_string(proxy.port()), o);
  ASSERT_TRUE(sess.Run({}, {}, {init, arm}).ok());
  const int before = proxy.connections();
  // Waits (bounded) for `cond`; polled, as nothing signals these.
  auto eventually = [](const std::function<bool()>& cond) { return WaitUntil(cond, absl::Seconds(60)); };

  absl::Notification done;
  absl::StatusOr<std::vector<Tensor>> out;
  absl::Time start = absl::Now();
  std::thread client([&] {
    out = sess.Run({incr});
    done.Notify();
  });
  Worker* held_on = worker->impl()->worker();
  const bool held = eventually([&] { return held_on->running_partitions() > 0; });
  proxy.DropAll();
  // The client retries on a new connection; the master, which already runs
  // that request, waits for the step instead of running it again.
  const bool retried = eventually([&] { return proxy.connections() > before; });
  const bool answered_early = done.HasBeenNotified();
  // Released from another session, straight to the worker.
  SessionOptions direct = o;
  Session releaser(worker->target(), direct);
  absl::Status released = releaser.Run({}, {}, {release}).status();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(120)));
  client.join();
  ASSERT_TRUE(held) << "the step never started";
  ASSERT_TRUE(released.ok()) << released;
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(retried) << "the client never came back on a new connection";
  EXPECT_FALSE(answered_early) << "the step was held at the barrier: nothing could have answered";
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 1) << "the retry got the first attempt's result";

  // Read the counter directly from the worker's master (no proxy).
  Session reader(worker->target(), direct);
  Scope r = Scope::NewRootScope();
  auto c = ops::Variable(r.WithDevice("/job:ps/task:0").WithOpName("counter"), {}, DT_INT64);
  auto value = reader.Run({c});
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)[0].scalar<int64_t>(), 1) << "the step ran once";
  std::printf("step with a broken connection took %.2f s\n", absl::ToDoubleSeconds(absl::Now() - start));
}

}  // namespace
}  // namespace distflow

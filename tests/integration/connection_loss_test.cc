// A client whose connection to its master breaks in the middle of a step:
// the client retries the RunStep with the same request id on a new
// connection, and the master answers it from the first attempt, so the step
// runs once and the client still gets its result. The break is made by a
// TCP proxy in this process between the client and the master (127.0.0.1).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "tcp_proxy.h"

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

  // A counter on the ps incremented by a step that takes several seconds here
  // (longer than a retry waits to reconnect, so the retry must wait for it)
  // (a chain of 1024^3 MatMuls on the worker runs first).
  Scope root = Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto w = root.WithDevice("/job:worker/task:0");
  auto counter = ops::MakeVariable(ps.WithOpName("counter"), ops::Const(ps, int64_t{0}));
  auto m = ops::Fill(w, {1024, 1024}, ops::Const(w, 0.001f));
  Output y = ops::MatMul(w, m, m);
  for (int i = 0; i < 800; ++i) y = ops::MatMul(w, y, m);
  auto slow = ops::Sum(w, y, {0, 1});
  auto incr = ops::AssignAdd(ps.WithControlDependencies({slow.op()}), counter, ops::Const(ps, int64_t{1}));
  auto init = ops::GlobalVariablesInitializer(root);

  SessionOptions o;
  o.wait_for_cluster_ms = 20000;
  o.in_process_master = false;  // through the proxy, as a client on another machine
  Session sess("grpc://127.0.0.1:" + std::to_string(proxy.port()), o);
  ASSERT_TRUE(sess.Run({}, {}, {init}).ok());
  const int before = proxy.connections();

  absl::Notification done;
  absl::StatusOr<std::vector<Tensor>> out;
  absl::Time start = absl::Now();
  std::thread client([&] {
    out = sess.Run({incr});
    done.Notify();
  });
  absl::SleepFor(absl::Milliseconds(300));
  const bool finished_early = done.HasBeenNotified();
  proxy.DropAll();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(120)));
  client.join();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_FALSE(finished_early) << "the step should still have been running when the connection broke";
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 1) << "the retry got the first attempt's result";
  EXPECT_GT(proxy.connections(), before) << "the retry came on a new connection";

  // Read the counter directly from the worker's master (no proxy).
  SessionOptions direct = o;
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

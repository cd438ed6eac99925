// in_process_cluster_test: a task that stops answering is declared dead and
// the steps that wait on it fail naming it; what one client may take from a
// task (step memory, sessions, concurrent partitions) is bounded.
#include <memory>
#include <string>
#include <thread>

#include "in_process_cluster_test.h"
#include "master/master.h"
#include "worker/worker.h"

namespace distflow {
namespace cluster_test {
namespace {

// A step that waits, on `barrier_task`, at a sync barrier no other replica
// reaches (for up to a minute), run from `client_task`'s master; worker 1
// then goes silent. Returns the step's status.
// With `consumer_device`, the step fetches an Identity of the barrier's
// output placed there (a partition receiving from the barrier's).
absl::Status StepWaitingWhileWorker1GoesSilent(int client_task, const std::string& barrier_device,
                                               const std::string& consumer_device = "") {
  auto spec = MakeLocalClusterSpec(1, 2);
  if (!spec.ok()) return spec.status();
  ServerOptions options;
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 400;
  options.orphan_grace_ms = -1;
  options.stall_log_ms = 200;
  options.bulk_transfer = false;
  auto servers = StartLocalCluster(*spec, options);
  if (!servers.ok()) return servers.status();
  Server& client = *(*servers)[1 + client_task];
  Server& w1 = *(*servers)[2];
  // A step of the chief's with a partition on worker 1 that waits (a sync
  // barrier no other replica reaches, for up to a minute).
  Scope root = Scope::NewRootScope();
  Scope on_w1 = root.WithDevice(barrier_device);
  auto step = ops::Const(on_w1, int64_t{0});
  auto wait = ops::Raw(on_w1, "SyncBarrierWait", {step},
                       ops::Attrs{{"shared_name", "barrier"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 2},
                                  {"total_num_replicas", 2},
                                  {"timeout_ms", 60000}});
  if (!root.ok()) return root.status();
  Session session(client.target());
  absl::Notification done;
  absl::Status result;
  std::thread runner([&] {
    Output fetch(wait, 0, on_w1);
    if (!consumer_device.empty()) fetch = ops::Identity(root.WithDevice(consumer_device), fetch);
    auto r = session.Run({fetch});
    result = r.status();
    done.Notify();
  });
  // Once every task of the step has reported it as stalled (on its own
  // heartbeat: the master, the barrier's worker and the consumer's),
  // silence worker 1.
  auto worker_on = [&](const std::string& device) {  // servers: ps 0, worker 0, worker 1
    return (*servers)[device == "/job:ps/task:0" ? 0 : (device == "/job:worker/task:0" ? 1 : 2)]->impl()->worker();
  };
  Master* master = client.impl()->master();
  Worker* barrier_worker = worker_on(barrier_device);
  Worker* consumer = consumer_device.empty() ? nullptr : worker_on(consumer_device);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return done.HasBeenNotified() ||
               (master->stalled_step_reports() > 0 && barrier_worker->stalled_step_reports() > 0 &&
                (consumer == nullptr || consumer->stalled_step_reports() > 0));
      },
      absl::Seconds(30)))
      << "the stalled step was not reported";
  EXPECT_FALSE(done.HasBeenNotified()) << result;
  if (done.HasBeenNotified()) {
    runner.join();
    return result;
  }
  w1.impl()->coordination()->Stop(/*leaving=*/false);
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20))) << "the step still waits on the dead task";
  runner.join();
  return result;
}

TEST(FailureDetection, AStepWaitingOnATaskThatStoppedAnsweringFailsNamingIt) {
  // The chief's step has a partition on worker 1, which goes silent.
  testing::internal::CaptureStderr();
  absl::Status s = StepWaitingWhileWorker1GoesSilent(0, "/job:worker/task:1", "/job:ps/task:0");
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  // Before it failed, the stalled step said what it waited for: the master
  // the partition on the ps, the ps its receive from worker 1, and worker 1
  // the send its barrier has not made.
  EXPECT_TRUE(absl::StrContains(log, "waiting for the partitions on /job:ps/replica:0/task:0")) << log;
  EXPECT_TRUE(absl::StrContains(log, "from /job:worker/replica:0/task:1")) << log;
  EXPECT_TRUE(absl::StrContains(log, "/job:ps/replica:0/task:0/device:CPU:0 (not sent yet)")) << log;
  EXPECT_TRUE(absl::StrContains(s.message(), "/job:worker/replica:0/task:1 stopped answering")) << s;
}

TEST(FailureDetection, TheParameterServerAbortsTheStepsOfAClientDeclaredDead) {
  // Worker 1's own step waits on the ps; worker 1 is declared dead (as when
  // it is cut off), so the ps ends that step's partition instead of keeping
  // it (and its receives) forever.
  absl::Status s = StepWaitingWhileWorker1GoesSilent(1, "/job:ps/task:0");
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[/job:ps/replica:0/task:0]")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "/job:worker/replica:0/task:1 stopped answering")) << s;
}

TEST(FailureDetection, AStepStartedAfterATaskWasDeclaredDeadFailsNamingIt) {
  // Worker 1 goes silent before the chief's step starts: the death was
  // reported when no step needed worker 1, so the step that starts later
  // must still fail (at the chief's next heartbeat), not wait at worker 1's
  // barrier for its minute.
  auto spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 400;
  options.orphan_grace_ms = -1;
  options.bulk_transfer = false;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server& chief = *(*servers)[1];
  Server& w1 = *(*servers)[2];
  const std::string w1_task = "/job:worker/replica:0/task:1";
  // The chief has heard of worker 1 before it goes silent.
  ASSERT_TRUE(WaitUntil([&] { return chief.impl()->coordination()->View().count(w1_task) > 0; }, absl::Seconds(20)));
  w1.impl()->coordination()->Stop(/*leaving=*/false);
  ASSERT_TRUE(
      WaitUntil([&] { return !chief.impl()->coordination()->DeathMessage(w1_task).empty(); }, absl::Seconds(20)))
      << "worker 1 was not declared dead";
  Scope root = Scope::NewRootScope();
  Scope on_w1 = root.WithDevice("/job:worker/task:1");
  auto wait = ops::Raw(on_w1, "SyncBarrierWait", {ops::Const(on_w1, int64_t{0})},
                       ops::Attrs{{"shared_name", "barrier"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 2},
                                  {"total_num_replicas", 2},
                                  {"timeout_ms", 60000}});
  ASSERT_TRUE(root.ok()) << root.status();
  Session session(chief.target());
  absl::Notification done;
  absl::Status result;
  std::thread runner([&] {
    result = session.Run({Output(wait, 0, on_w1)}).status();
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20))) << "the step waits on a task declared dead";
  runner.join();
  EXPECT_TRUE(absl::IsUnavailable(result)) << result;
  EXPECT_TRUE(absl::StrContains(result.message(), w1_task + " stopped answering")) << result;
}

// ---- Bounded resources: what one client may take from a task.

// A Fill of rows x 1000 floats placed on `device`.
Output FillOn(const Scope& root, const std::string& device, int rows, const std::string& name) {
  Scope s = root.WithDevice(device);
  auto dims = ops::Const(s, Tensor::FromVector<int32_t>({rows, 1000}, TensorShape({2})));
  auto fill = ops::Raw(s.WithOpName(name), "Fill", {dims, ops::Const(s, 1.0f)}, ops::Attrs{});
  return Output(fill, 0, s);
}

TEST(Limits, AStepThatWouldAllocateTooMuchFailsNamingTheNodeAndTheLimit) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.worker.max_step_bytes = 1 << 20;  // 1 MiB a step
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  Output small = FillOn(root, "/job:ps/task:0", 100, "small");  // 400 KB
  Output huge = FillOn(root, "/job:ps/task:0", 1000, "huge");   // 4 MB
  ASSERT_TRUE(root.ok()) << root.status();
  Session session((*servers)[1]->target());
  auto r = session.Run({huge});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "Node 'huge'")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "/job:ps/replica:0/task:0")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--max_step_bytes")) << r.status();
  // The task and the session go on serving steps within the limit.
  auto ok = session.Run({small});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].NumElements(), 100 * 1000);
}

TEST(Limits, TheStepLimitCountsWhatOutputsHoldNotWhatWasEverAllocated) {
  // Six 400 KB outputs in a chain (2.4 MB in all), each freed once the next
  // is computed: never more than 800 KB at once, under a 1 MiB limit.
  Scope root = Scope::NewRootScope();
  Output x = FillOn(root, "", 100, "x0");
  for (int k = 1; k < 6; ++k) x = ops::Add(root.WithOpName("x" + std::to_string(k)), x, ops::Const(root, 1.0f));
  SessionOptions so;
  so.max_step_bytes = 1 << 20;
  so.inter_op_threads = 1;
  Session session("", so);
  auto r = session.Run({x});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)[0].flat<float>()[0], 6.0f);
}

TEST(Limits, ALocalSessionHonoursItsStepLimit) {
  Scope root = Scope::NewRootScope();
  Output huge = FillOn(root, "", 1000, "huge");
  SessionOptions so;
  so.max_step_bytes = 1 << 20;
  Session session("", so);
  auto r = session.Run({huge});
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  Session unlimited;
  EXPECT_TRUE(unlimited.Run({huge}).ok());
}

TEST(Limits, ATaskHoldsAtMostMaxSessionsSessions) {
  auto spec = MakeLocalClusterSpec(0, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.max_sessions = 2;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  auto one = ops::Const(root, 1.0f);
  const std::string target = (*servers)[0]->target();
  Session a(target), b(target), c(target);
  ASSERT_TRUE(a.Run({one}).ok());
  ASSERT_TRUE(b.Run({one}).ok());
  auto r = c.Run({one});
  EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--max_sessions")) << r.status();
  // Closing one makes room.
  ASSERT_TRUE(a.Close().ok());
  Session d(target);
  EXPECT_TRUE(d.Run({one}).ok());
}

TEST(Limits, ATaskRunsAtMostMaxConcurrentStepsPartitions) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options;
  options.worker.max_concurrent_steps = 1;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  Scope root = Scope::NewRootScope();
  Scope on_ps = root.WithDevice("/job:ps/task:0");
  // A partition on the ps that waits (a barrier nobody releases) for 3 s.
  auto wait = ops::Raw(on_ps, "SyncBarrierWait", {ops::Const(on_ps, int64_t{0})},
                       ops::Attrs{{"shared_name", "limits"},
                                  {"replica_id", 0},
                                  {"replicas_to_aggregate", 1},
                                  {"total_num_replicas", 1},
                                  {"timeout_ms", 3000}});
  auto other = ops::Identity(on_ps, ops::Const(on_ps, 2.0f));
  ASSERT_TRUE(root.ok()) << root.status();
  const std::string target = (*servers)[1]->target();
  Session waiting(target), second(target);
  ASSERT_TRUE(second.Run({other}).ok());
  absl::Status waited;
  std::thread blocked([&] { waited = waiting.Run({Output(wait, 0, on_ps)}).status(); });
  Worker* ps = (*servers)[0]->impl()->worker();
  WaitUntil([&] { return ps->running_partitions() > 0; }, absl::Seconds(10));
  // While it runs, the ps refuses a second partition.
  absl::Status refused = second.Run({other}).status();
  blocked.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "--max_concurrent_steps")) << refused;
  // Once it ended, the ps serves again. The ps counts the partition as ended
  // just after it answers, so the answer can reach the client first: wait
  // for the count, not for the answer.
  WaitUntil([&] { return ps->running_partitions() == 0; }, absl::Seconds(10));
  EXPECT_TRUE(second.Run({other}).ok());
}

}  // namespace
}  // namespace cluster_test
}  // namespace distflow

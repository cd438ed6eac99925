// Server (server.cc over grpc_server.cc) on its own: creating a server for a
// task the cluster has or has not, what Start binds (port 0, the bulk and
// status ports) and refuses, Stop and Join from several threads,
// exit_status and DeadTasks under failure detection, a parameter server that
// gives up on its job, ShutdownCluster, and StartLocalCluster (port 0, a
// task whose port is taken). Every server is real, in this process, on
// 127.0.0.1. The client side of grpc:// sessions is grpc_session_test.cc.
#include "distflow/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/ports.h"
#include "base/wait_until.h"
#include "bulk/bulk_transfer.h"
#include "coordination/coordination.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/grpc_server.h"
#include "server/grpc_session.h"
#include "server/session_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddNode;
using test::BoundedOptions;
using test::LeanOptions;
using test::NewSession;
using test::OneConst;
using test::StartOneTask;

constexpr char kPs[] = "/job:ps/replica:0/task:0";
constexpr char kWorker0[] = "/job:worker/replica:0/task:0";
constexpr char kWorker1[] = "/job:worker/replica:0/task:1";
constexpr absl::Duration kBound = absl::Seconds(60);

// Polls `condition` until it holds or `bound` has passed; whether it held.
bool Eventually(const std::function<bool()>& condition, absl::Duration bound = kBound) {
  return WaitUntil(condition, bound, absl::Milliseconds(10));
}

// Server::Join on a thread of its own, so that a test waits for it with a
// bound. A server still running when this goes is stopped first.
class Joiner {
 public:
  explicit Joiner(Server* server) : server_(server) {
    thread_ = std::thread([this] {
      server_->Join();
      joined_.Notify();
    });
  }
  ~Joiner() {
    if (!joined_.HasBeenNotified()) server_->Stop();
    thread_.join();
  }
  bool JoinedWithin(absl::Duration bound) { return joined_.WaitForNotificationWithTimeout(bound); }

 private:
  Server* const server_;
  absl::Notification joined_;
  std::thread thread_;
};

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A socket listening on 127.0.0.1:`port` while this lives: nothing else can bind the port.
class TakenPort {
 public:
  explicit TakenPort(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a = Loopback(port);
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd_, 1) == 0;
  }
  ~TakenPort() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

// Whether something accepts connections on 127.0.0.1:`port`.
bool Accepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a = Loopback(port);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return connected;
}

proto::TaskHealth::State StateOf(const CoordinationAgent& agent, const std::string& task) {
  const std::map<std::string, proto::TaskHealth> view = agent.View();
  auto it = view.find(task);
  return it == view.end() ? proto::TaskHealth::UNKNOWN : it->second.state();
}

// ---- Server

TEST(Server, CreateRefusesAJobOrTaskTheClusterDoesNotHaveNamingIt) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse("ps|127.0.0.1:1,worker|127.0.0.1:2;127.0.0.1:3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Server>> chief = Server::Create(*spec, "chief", 0);
  ASSERT_FALSE(chief.ok());
  EXPECT_EQ(chief.status().code(), absl::StatusCode::kInvalidArgument) << chief.status();
  EXPECT_TRUE(absl::StrContains(chief.status().message(), "'chief'")) << chief.status();
  EXPECT_TRUE(absl::StrContains(chief.status().message(), "ps, worker")) << "the jobs there are: " << chief.status();
  for (int index : {2, -1}) {
    absl::StatusOr<std::unique_ptr<Server>> bad = Server::Create(*spec, "worker", index);
    ASSERT_FALSE(bad.ok()) << index;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), absl::StrCat("task_index ", index))) << bad.status();
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "0..1")) << "the valid indices: " << bad.status();
  }
  absl::StatusOr<std::unique_ptr<Server>> good = Server::Create(*spec, "worker", 1);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)->task_name(), kWorker1);
  EXPECT_EQ((*good)->port(), 0) << "nothing is bound before Start";
}

TEST(Server, PortZeroBindsAFreePortThatTargetAndPortReport) {
  ServerOptions options = LeanOptions();
  options.status_port = 0;
  std::unique_ptr<Server> server = StartOneTask(options);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(server->target(), absl::StrCat("grpc://127.0.0.1:", port));
  EXPECT_EQ(server->task_name(), kWorker0);
  EXPECT_EQ(server->cluster().task_address("worker", 0).value(), absl::StrCat("127.0.0.1:", port))
      << "its cluster names the port it bound, not 0";
  if (BulkTransferEnabledByEnv()) {
    EXPECT_GT(server->bulk_port(), 0);
    EXPECT_NE(server->bulk_port(), port);
  }
  ASSERT_GT(server->status_port(), 0);
  EXPECT_NE(server->status_port(), port);
  EXPECT_TRUE(Accepts(server->status_port())) << "the status page listens on the port it reports";
  // The master answers at the target: a session that must use gRPC runs a step there.
  std::unique_ptr<GrpcSession> session = NewSession(server->target(), BoundedOptions(/*in_process_master=*/false));
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Extend(OneConst("seven", 7)).ok());
  absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"seven"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 7.f);
}

TEST(Server, StartAgainWhileRunningKeepsItsPortAndStartAfterStopIsRefused) {
  std::unique_ptr<Server> server = StartOneTask(LeanOptions());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  const std::string target = server->target();
  absl::Status again = server->Start();
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_EQ(server->port(), port) << "a second Start binds nothing new";
  EXPECT_EQ(server->target(), target);
  EXPECT_EQ(server->status_port(), 0) << "no status page unless asked for";
  server->Stop();
  absl::Status restarted = server->Start();
  EXPECT_EQ(restarted.code(), absl::StatusCode::kFailedPrecondition) << restarted;
  EXPECT_TRUE(absl::StrContains(restarted.message(), kWorker0)) << restarted;
  EXPECT_TRUE(absl::StrContains(restarted.message(), "create a new Server")) << restarted;
}

TEST(Server, StopFromTwoThreadsAtOnceEndsJoinWithAnOkExitStatus) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse("worker|127.0.0.1:0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<Server>> created = Server::Create(*spec, "worker", 0, LeanOptions());
  ASSERT_TRUE(created.ok()) << created.status();
  Server& server = **created;
  // Before Start there is nothing to stop or wait for, and an early Stop does not prevent the Start.
  server.Stop();
  {
    Joiner early(&server);
    EXPECT_TRUE(early.JoinedWithin(kBound)) << "Join before Start returns at once";
  }
  ASSERT_TRUE(server.Start().ok());
  Joiner joiner(&server);
  absl::Notification first_done, second_done;
  std::thread first([&] {
    server.Stop();
    first_done.Notify();
  });
  std::thread second([&] {
    server.Stop();
    second_done.Notify();
  });
  EXPECT_TRUE(first_done.WaitForNotificationWithTimeout(kBound));
  EXPECT_TRUE(second_done.WaitForNotificationWithTimeout(kBound));
  EXPECT_TRUE(joiner.JoinedWithin(kBound)) << "Join returns once the server has stopped";
  first.join();
  second.join();
  EXPECT_TRUE(server.exit_status().ok()) << server.exit_status();
  EXPECT_TRUE(server.DeadTasks().empty());
}

TEST(Server, AFixedBulkPortThatIsTakenFailsStartNamingItAndBulkOffHasNone) {
  ASSERT_TRUE(BulkTransferEnabledByEnv()) << "DISTFLOW_BULK_TRANSFER=0 turns bulk ports off: run without it";
  std::unique_ptr<Server> first = StartOneTask(LeanOptions());
  ASSERT_NE(first, nullptr);
  const int taken = first->bulk_port();
  ASSERT_GT(taken, 0);
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse("ps|127.0.0.1:0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions pinned = LeanOptions();
  pinned.bulk_port = taken;
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Create(*spec, "ps", 0, pinned);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), kPs)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("127.0.0.1:", taken))) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--bulk_port")) << "the way out: " << s;

  ServerOptions off = LeanOptions();
  off.bulk_transfer = false;
  std::unique_ptr<Server> plain = StartOneTask(off, "ps");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->bulk_port(), 0);
}

TEST(Server, AStartThatCannotTakeItsPortClosesTheBulkPortItOpened) {
  std::unique_ptr<Server> first = StartOneTask(LeanOptions(), "ps");
  ASSERT_NE(first, nullptr);
  absl::StatusOr<int> bulk = PickUnusedTcpPort();
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  absl::StatusOr<ClusterSpec> same_port = ClusterSpec::Parse(absl::StrCat("ps|127.0.0.1:", first->port()));
  ASSERT_TRUE(same_port.ok()) << same_port.status();
  ServerOptions pinned = LeanOptions();
  pinned.bulk_port = *bulk;
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Create(*same_port, "ps", 0, pinned);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("cannot listen on 127.0.0.1:", first->port()))) << s;
  EXPECT_EQ((*second)->bulk_port(), 0) << "the failed start kept its bulk server";

  // The bulk port it had opened is free again, for a server of its own.
  std::unique_ptr<Server> third = StartOneTask(pinned, "ps");
  ASSERT_NE(third, nullptr) << "the bulk port is still held";
  EXPECT_EQ(third->bulk_port(), *bulk);
}

// Heartbeats often enough to declare a task dead within seconds, and a goodbye
// (bounded by the interval) that a loaded machine still delivers.
ServerOptions QuickFailureDetection(int orphan_grace_ms) {
  ServerOptions o = LeanOptions();
  o.heartbeat_interval_ms = 250;
  o.heartbeat_timeout_ms = 1500;
  o.orphan_grace_ms = orphan_grace_ms;
  o.stall_log_ms = 0;
  o.bulk_transfer = false;
  return o;
}

TEST(Server, DeadTasksNamesATaskThatWentSilentButNotOneThatStoppedCleanly) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec, QuickFailureDetection(/*orphan_grace_ms=*/-1));
  ASSERT_TRUE(servers.ok()) << servers.status();
  ASSERT_EQ(servers->size(), 3u);
  Server& ps = *(*servers)[0];
  Server& silent = *(*servers)[1];
  Server& leaving = *(*servers)[2];
  ASSERT_EQ(ps.task_name(), kPs);
  ASSERT_EQ(silent.task_name(), kWorker0);
  ASSERT_EQ(leaving.task_name(), kWorker1);
  const CoordinationAgent* agent = ps.impl()->coordination();
  ASSERT_NE(agent, nullptr) << "failure detection is on";
  auto alive = [&](const char* task) { return StateOf(*agent, task) == proto::TaskHealth::ALIVE; };
  ASSERT_TRUE(Eventually([&] { return alive(kWorker0) && alive(kWorker1); })) << "the ps never heard from both workers";
  EXPECT_TRUE(ps.DeadTasks().empty());

  leaving.Stop();                                          // says goodbye
  silent.impl()->coordination()->Stop(/*leaving=*/false);  // its server still runs; its heartbeats stop
  ASSERT_TRUE(Eventually([&] { return !ps.DeadTasks().empty(); })) << "the silent worker was never declared dead";
  EXPECT_EQ(ps.DeadTasks(), std::vector<std::string>{kWorker0});
  EXPECT_EQ(StateOf(*agent, kWorker1), proto::TaskHealth::LEFT) << "a clean stop is not a death";
}

TEST(Server, AParameterServerWhoseWorkersAreGoneStopsItselfAndEndsTheCluster) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec, QuickFailureDetection(/*orphan_grace_ms=*/0));
  ASSERT_TRUE(servers.ok()) << servers.status();
  Server& ps = *(*servers)[0];
  Server& worker = *(*servers)[1];
  ASSERT_EQ(ps.task_name(), kPs);
  const CoordinationAgent* agent = ps.impl()->coordination();
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(Eventually([&] { return StateOf(*agent, kWorker0) == proto::TaskHealth::ALIVE; }));
  const std::string ps_target = ps.target();
  Joiner ps_joined(&ps), worker_joined(&worker);

  worker.impl()->coordination()->Stop(/*leaving=*/false);
  ASSERT_TRUE(ps_joined.JoinedWithin(kBound)) << "the ps did not give up on its job";
  ASSERT_TRUE(worker_joined.JoinedWithin(kBound)) << "the ps did not end the cluster";
  const absl::Status ps_why = ps.exit_status();
  EXPECT_EQ(ps_why.code(), absl::StatusCode::kUnavailable) << ps_why;
  EXPECT_TRUE(absl::StrContains(ps_why.message(), absl::StrCat(kPs, " gives up on its job"))) << ps_why;
  EXPECT_TRUE(absl::StrContains(ps_why.message(), kWorker0)) << "names the task that died: " << ps_why;
  const absl::Status worker_why = worker.exit_status();
  EXPECT_EQ(worker_why.code(), absl::StatusCode::kCancelled) << "ended on purpose, not to be retried: " << worker_why;
  EXPECT_TRUE(absl::StrContains(worker_why.message(), "gives up on its job")) << "the ps's reason: " << worker_why;

  // A session of this process on the ps is told why at once instead of waiting for it.
  std::unique_ptr<GrpcSession> session = NewSession(ps_target, BoundedOptions(/*in_process_master=*/true));
  ASSERT_NE(session, nullptr);
  absl::Status s = session->Extend(OneConst("c", 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "gives up on its job")) << s;
  // On the worker the ps ended, a session fails at once too, and not as
  // something to retry (a MonitoredSession would wait for its recovery
  // timeout on a server that will not come back).
  std::unique_ptr<GrpcSession> on_worker = NewSession(worker.target(), BoundedOptions(/*in_process_master=*/true));
  ASSERT_NE(on_worker, nullptr);
  absl::Status w = on_worker->Extend(OneConst("c", 1));
  EXPECT_EQ(w.code(), absl::StatusCode::kCancelled) << w;
  EXPECT_TRUE(absl::StrContains(w.message(), "gives up on its job")) << w;
}

// ---- ShutdownCluster, StartLocalCluster

TEST(ShutdownCluster, StopsEveryTaskButTheExceptedOnesAndPassesOverTasksThatAreGone) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);  // worker 1 never starts
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options = LeanOptions();
  options.heartbeat_timeout_ms = 0;  // no failure detection: only ShutdownCluster stops anything
  absl::StatusOr<std::unique_ptr<Server>> ps = Server::Create(*spec, "ps", 0, options);
  absl::StatusOr<std::unique_ptr<Server>> worker = Server::Create(*spec, "worker", 0, options);
  ASSERT_TRUE(ps.ok() && worker.ok());
  ASSERT_TRUE((*ps)->Start().ok());
  ASSERT_TRUE((*worker)->Start().ok());
  Joiner ps_joined(ps->get()), worker_joined(worker->get());

  absl::Status bad = ShutdownCluster(*spec, "training is over", {"worker0"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "'worker0'")) << bad;
  EXPECT_TRUE((*ps)->exit_status().ok()) << "a bad request stops nothing";
  // The short spelling of a task's name is the same task.
  absl::Status s = ShutdownCluster(*spec, "training is over", {"/job:worker/task:0"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(ps_joined.JoinedWithin(kBound)) << "the ps was asked to stop";
  EXPECT_TRUE((*ps)->exit_status().ok()) << "a shutdown is a clean end: " << (*ps)->exit_status();
  {
    // The excepted worker still serves steps.
    SessionOptions o = BoundedOptions(/*in_process_master=*/false);
    o.device_filters = {"/job:worker/task:0"};
    std::unique_ptr<GrpcSession> session = NewSession((*worker)->target(), o);
    ASSERT_NE(session, nullptr);
    ASSERT_TRUE(session->Extend(OneConst("c", 2)).ok());
    absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"c"}, {});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<float>(), 2.f);
  }

  s = ShutdownCluster(*spec, "training is really over");  // the ps and worker 1 are gone
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(worker_joined.JoinedWithin(kBound));
  EXPECT_TRUE((*worker)->exit_status().ok()) << (*worker)->exit_status();
}

TEST(ShutdownCluster, CallsWithoutTheClustersOwnTokenAreRefusedAndWithItStopTheTask) {
  ServerOptions options = LeanOptions();
  options.auth_token = "this-clusters-secret";
  options.heartbeat_timeout_ms = 0;
  std::unique_ptr<Server> ps = StartOneTask(options, "ps");
  ASSERT_NE(ps, nullptr);
  Joiner joined(ps.get());
  const ClusterSpec cluster = ps->cluster();
  absl::Status refused = ShutdownCluster(cluster, "over", {}, std::string("another-secret"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnauthenticated) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), absl::StrCat(kPs, ": "))) << refused;
  EXPECT_FALSE(joined.JoinedWithin(absl::ZeroDuration())) << "a refused request stops nothing";

  absl::Status s = ShutdownCluster(cluster, "over", {}, std::string("this-clusters-secret"));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(joined.JoinedWithin(kBound)) << "the ps was asked to stop with its cluster's token";
  EXPECT_TRUE(ps->exit_status().ok()) << ps->exit_status();
}

TEST(StartLocalCluster, MovesATaskWhosePortIsTakenAndTellsTheTasksAlreadyRunning) {
  absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::set<int> picked;
  for (const std::string& job : spec->jobs()) {
    for (int t : spec->task_indices(job)) {
      absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(spec->task_address(job, t).value());
      ASSERT_TRUE(hp.ok()) << hp.status();
      EXPECT_EQ(hp->first, "127.0.0.1");
      EXPECT_GT(hp->second, 0);
      picked.insert(hp->second);
    }
  }
  EXPECT_EQ(picked.size(), 2u) << "every task has a port of its own";

  // The worker starts after the ps (jobs in name order); its port is taken.
  const int taken = SplitHostPort(spec->task_address("worker", 0).value())->second;
  TakenPort holder(taken);
  ASSERT_TRUE(holder.ok()) << "could not take port " << taken;
  ServerOptions options = LeanOptions();
  options.heartbeat_timeout_ms = 0;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  ASSERT_EQ(servers->size(), 2u);
  Server& ps = *(*servers)[0];
  Server& worker = *(*servers)[1];
  ASSERT_EQ(worker.task_name(), kWorker0);
  EXPECT_NE(worker.port(), taken);
  EXPECT_EQ(worker.target(), absl::StrCat("grpc://127.0.0.1:", worker.port()));
  EXPECT_EQ(worker.cluster().task_address("worker", 0).value(), absl::StrCat("127.0.0.1:", worker.port()));
  EXPECT_EQ(ps.cluster().task_address("worker", 0).value(), absl::StrCat("127.0.0.1:", worker.port()))
      << "the ps's cluster (what ShutdownCluster(ps.cluster()) asks) names where the worker went";

  // The ps started under the old address: a step of its master reaches the worker only if it was told.
  proto::GraphDef g = OneConst("on_worker", 3, "/job:worker/task:0");
  AddNode(&g, "squared_on_ps", "Square", {"on_worker"})->set_device("/job:ps/task:0");
  std::unique_ptr<GrpcSession> session = NewSession(ps.target(), BoundedOptions(/*in_process_master=*/true));
  ASSERT_NE(session, nullptr);
  absl::Status extended = session->Extend(g);
  ASSERT_TRUE(extended.ok()) << extended;
  absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"squared_on_ps"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 9.f);
}

TEST(StartLocalCluster, GivesEveryTaskThePortsPickedForPortZero) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse("ps|127.0.0.1:0,worker|127.0.0.1:0;127.0.0.1:0");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options = LeanOptions();
  options.heartbeat_timeout_ms = 0;
  auto servers = StartLocalCluster(*spec, options);
  ASSERT_TRUE(servers.ok()) << servers.status();
  ASSERT_EQ(servers->size(), 3u);
  std::set<int> ports;
  for (const auto& server : *servers) {
    EXPECT_GT(server->port(), 0);
    ports.insert(server->port());
  }
  EXPECT_EQ(ports.size(), 3u);
  // A step of worker 1's master crosses all three tasks: each was told the
  // others' real ports (with port 0 each knew only its own).
  proto::GraphDef g = OneConst("on_ps", 2, "/job:ps/task:0");
  AddNode(&g, "on_w0", "Square", {"on_ps"})->set_device("/job:worker/task:0");
  AddNode(&g, "on_w1", "Square", {"on_w0"})->set_device("/job:worker/task:1");
  std::unique_ptr<GrpcSession> session =
      NewSession((*servers)[2]->target(), BoundedOptions(/*in_process_master=*/false));
  ASSERT_NE(session, nullptr);
  absl::Status extended = session->Extend(g);
  ASSERT_TRUE(extended.ok()) << extended;
  absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"on_w1"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 16.f);
}

}  // namespace
}  // namespace distflow

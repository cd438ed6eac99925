// The master side of the distributed core (master.cc, master_session.cc,
// master_step.cc), driven directly through a Master object: sessions (create,
// extend, close, a step still being planned when its session closes, the
// max-sessions limit (sessions still waiting for the cluster included), waiting for tasks), steps over
// partitions on three tasks (fetches in request order, feeds, traces), a
// retried request id that runs once, a failure on one task aborting the step
// on every task, deadlines, cancellation on Close and on a task's death,
// ListDevices and Reset (every task asked, even when one is down), and a
// registration that never answers (ended by Close and by the task's death). The workers are real servers on loopback
// ports in this process; the Master under test is a separate object over its own WorkerCache, with worker 0 as its
// in-memory local worker.
//
// Steps that must stay running wait in a SyncBarrierWait op whose own timeout
// (kHoldMs) is far beyond the bound the test waits for an answer (kBound): an
// answer within the bound means the step was cancelled, not that it ran out.
#include "master/master.h"

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/ports.h"
#include "base/status_macros.h"
#include "base/thread_pool.h"
#include "base/wait_until.h"
#include "distflow/server.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "master/master_session.h"
#include "proto/master.pb.h"
#include "rpc/worker_cache.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/grpc_server.h"
#include "tensor/tensor_codec.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;
using test::AddPlaceholder;
using test::AddVariable;

constexpr char kPs[] = "/job:ps/replica:0/task:0";
constexpr char kWorker0[] = "/job:worker/replica:0/task:0";  // the master's own task
constexpr char kWorker1[] = "/job:worker/replica:0/task:1";
constexpr absl::Duration kBound = absl::Seconds(60);
constexpr int64_t kHoldMs = 300000;

std::string Cpu(const std::string& task) { return task + "/device:CPU:0"; }

proto::NodeDef* On(const std::string& device, proto::NodeDef* n) {
  n->set_device(device);
  return n;
}

// Adds a step barrier on `device` that holds a step: `name` (SyncBarrierWait)
// answers once the barrier's step differs from the int64 fed to `name`_at.
// Until `name`_init (SyncBarrierRelease) has set the barrier's step to 0 it
// holds whatever is fed; after that, feeding 1 passes (answering 0) and
// feeding 0 holds. A held step ends only when it is cancelled.
void AddBarrier(proto::GraphDef* g, const std::string& name, const std::string& device) {
  On(device, AddPlaceholder(g, name + "_at", DT_INT64, PartialShape::Scalar()));
  On(device, AddConst(g, name + "_zero", Tensor::Scalar<int64_t>(0)));
  SetAttrString(On(device, AddNode(g, name + "_init", "SyncBarrierRelease", {name + "_zero"})), "shared_name", name);
  proto::NodeDef* wait = On(device, AddNode(g, name, "SyncBarrierWait", {name + "_at"}));
  SetAttrString(wait, "shared_name", name);
  SetAttrInt(wait, "replica_id", 0);
  SetAttrInt(wait, "replicas_to_aggregate", 1);
  SetAttrInt(wait, "total_num_replicas", 1);
  SetAttrInt(wait, "timeout_ms", kHoldMs);
}

proto::RunStepRequest Request(const std::string& handle, const std::vector<std::string>& fetches,
                              const std::vector<std::string>& targets = {}) {
  proto::RunStepRequest req;
  req.set_session_handle(handle);
  for (const std::string& f : fetches) req.add_fetch(f);
  for (const std::string& t : targets) req.add_target(t);
  return req;
}

void Feed(proto::RunStepRequest* req, const std::string& name, const Tensor& value) {
  proto::NamedTensor* nt = req->add_feed();
  nt->set_name(name);
  EncodeTensor(value, nt->mutable_tensor());
}

Tensor Fetched(const proto::RunStepResponse& resp, int i) {
  if (i >= resp.tensor_size()) {
    ADD_FAILURE() << "the answer has " << resp.tensor_size() << " tensors, not " << i + 1;
    return Tensor();
  }
  absl::StatusOr<Tensor> t = DecodeTensor(resp.tensor(i).tensor());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

// A step started on a master; `status` and `resp` are its answer once `done`
// is notified. The master's callback holds it, so a test that stops waiting
// leaves nothing dangling.
struct StepCall {
  proto::RunStepRequest req;
  proto::RunStepResponse resp;
  absl::Status status;
  std::atomic<int> answers{0};
  absl::Notification done;
};

std::shared_ptr<StepCall> StartStep(Master* master, proto::RunStepRequest req) {
  auto call = std::make_shared<StepCall>();
  call->req = std::move(req);
  master->RunStepAsync(&call->req, &call->resp, [call](absl::Status s) {
    if (call->answers.fetch_add(1) > 0) return;  // a second answer: Answered() reports it
    call->status = std::move(s);
    call->done.Notify();
  });
  return call;
}

// Waits (bounded) until `worker` runs no partition: nothing tells when a
// cancelled partition has unwound, so this polls.
::testing::AssertionResult BecomesIdle(Worker* worker, absl::Duration bound = kBound) {
  if (WaitUntil([&] { return worker->running_partitions() == 0; }, bound)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << worker->task_name() << " still runs " << worker->running_partitions()
                                       << " partition(s) after " << bound;
}

// The step answered, once, within `bound`.
::testing::AssertionResult Answered(StepCall& call, absl::Duration bound = kBound) {
  if (!call.done.WaitForNotificationWithTimeout(bound)) {
    return ::testing::AssertionFailure() << "the master did not answer within " << bound;
  }
  if (int n = call.answers.load(); n != 1) return ::testing::AssertionFailure() << "answered " << n << " times";
  return ::testing::AssertionSuccess();
}

class MasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<ClusterSpec> spec = MakeLocalClusterSpec(1, 2);
    ASSERT_TRUE(spec.ok()) << spec.status();
    ServerOptions options;
    options.bulk_transfer = false;
    options.auth_token = "";
    options.heartbeat_timeout_ms = 0;  // tasks are declared dead by the tests, not by heartbeats
    options.worker.inter_op_threads = 2;
    options.worker.intra_op_threads = 1;
    absl::StatusOr<std::vector<std::unique_ptr<Server>>> servers = StartLocalCluster(*spec, options);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    // StartLocalCluster may have moved a task to another port: take the bound ones.
    for (const auto& s : servers_) {
      const std::string job = absl::StrContains(s->task_name(), "/job:ps/") ? "ps" : "worker";
      const int index = absl::EndsWith(s->task_name(), "task:1") ? 1 : 0;
      jobs_[job][index] = absl::StrCat("127.0.0.1:", s->port());
    }
    absl::StatusOr<ClusterSpec> bound = ClusterSpec::FromJobs(jobs_);
    ASSERT_TRUE(bound.ok()) << bound.status();
    workers_ = std::make_unique<WorkerCache>(*bound, "");
    master_ = std::make_unique<Master>(kWorker0, workers_.get(), WorkerOf(kWorker0));
  }

  void TearDown() override {
    master_.reset();  // closes its sessions while the workers still answer
    servers_.clear();
  }

  Worker* WorkerOf(const std::string& task) {
    for (const auto& s : servers_)
      if (s->task_name() == task) return s->impl()->worker();
    ADD_FAILURE() << "no server for " << task;
    return nullptr;
  }

  absl::StatusOr<std::string> CreateSession(Master* master, const proto::GraphDef& graph,
                                            proto::SessionConfig config = {}) {
    proto::CreateSessionRequest req;
    *req.mutable_graph_def() = graph;
    *req.mutable_config() = std::move(config);
    proto::CreateSessionResponse resp;
    RETURN_IF_ERROR(master->CreateSession(req, &resp));
    return resp.session_handle();
  }
  absl::StatusOr<std::string> CreateSession(const proto::GraphDef& graph, proto::SessionConfig config = {}) {
    return CreateSession(master_.get(), graph, std::move(config));
  }

  // Runs a step to its end (bounded): its answer, or its error.
  absl::StatusOr<proto::RunStepResponse> Run(proto::RunStepRequest req) {
    std::shared_ptr<StepCall> call = StartStep(master_.get(), std::move(req));
    if (::testing::AssertionResult answered = Answered(*call); !answered) {
      return absl::InternalError(answered.message());
    }
    if (!call->status.ok()) return call->status;
    return call->resp;
  }

  // The live tasks plus /job:straggler/task:0 at `address`, a free port
  // where nothing listens (until a test starts a server there).
  absl::StatusOr<ClusterSpec> WithStraggler(std::string* address) {
    ASSIGN_OR_RETURN(int port, PickUnusedTcpPort());
    *address = absl::StrCat("127.0.0.1:", port);
    ClusterSpec::JobMap jobs = jobs_;
    jobs["straggler"][0] = *address;
    return ClusterSpec::FromJobs(jobs);
  }

  ClusterSpec::JobMap jobs_;  // the live tasks, at their bound ports
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<WorkerCache> workers_;
  std::unique_ptr<Master> master_;
};

TEST_F(MasterTest, RunsAStepOverThreeTasksAndAnswersEveryFetchInRequestOrder) {
  proto::GraphDef g;
  On(kPs, AddConst(&g, "a", Tensor::FromVector<float>({1, 2, 3})));
  On(kWorker1, AddConst(&g, "b", Tensor::FromVector<float>({4, 5, 6})));
  AddNode(&g, "sum", "Add", {"a", "b"});  // unconstrained: the master's own task, run in memory
  On(kWorker1, AddNode(&g, "prod", "Mul", {"a", "b"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();

  // The first run builds the plan on the master's pool, the second reuses it
  // and traces every partition, including ps's, which only sends.
  for (bool trace : {false, true}) {
    SCOPED_TRACE(trace ? "traced, cached plan" : "first run");
    proto::RunStepRequest req = Request(*handle, {"sum", "prod", "prod:0"});
    req.set_trace(trace);
    absl::StatusOr<proto::RunStepResponse> resp = Run(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    ASSERT_EQ(resp->tensor_size(), 3);
    EXPECT_EQ(resp->tensor(0).name(), "sum:0");
    EXPECT_EQ(resp->tensor(1).name(), "prod:0");
    EXPECT_EQ(resp->tensor(2).name(), "prod:0");
    EXPECT_TENSOR_EQ(Tensor::FromVector<float>({5, 7, 9}), Fetched(*resp, 0));
    EXPECT_TENSOR_EQ(Tensor::FromVector<float>({4, 10, 18}), Fetched(*resp, 1));
    EXPECT_TENSOR_EQ(Tensor::FromVector<float>({4, 10, 18}), Fetched(*resp, 2))
        << "a fetch asked twice is answered twice";
    std::set<std::string> traced;
    for (const proto::DeviceStepStats& d : resp->step_stats().dev_stats()) traced.insert(d.device());
    if (trace) {
      EXPECT_EQ(traced, (std::set<std::string>{Cpu(kPs), Cpu(kWorker0), Cpu(kWorker1)}));
    } else {
      EXPECT_TRUE(traced.empty());
    }
  }
  std::vector<Master::StepRecord> recent = master_->RecentSteps();
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].status, "OK");
  EXPECT_EQ(recent[1].status, "OK");
}

TEST_F(MasterTest, FeedsReachTheirPartitionAndATensorFedTwiceIsRefused) {
  proto::GraphDef g;
  On(kPs, AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({2})));
  On(kWorker1, AddConst(&g, "c", Tensor::FromVector<float>({10, 100})));
  On(kWorker1, AddNode(&g, "y", "Mul", {"x", "c"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();

  proto::RunStepRequest req = Request(*handle, {"y", "x"});
  Feed(&req, "x", Tensor::FromVector<float>({1, 2}));
  absl::StatusOr<proto::RunStepResponse> resp = Run(req);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({10, 200}), Fetched(*resp, 0));
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({1, 2}), Fetched(*resp, 1)) << "a fed tensor fetched is the fed value";

  // Another value, same signature (so the cached plan): the new value is used.
  proto::RunStepRequest again = Request(*handle, {"y", "x"});
  Feed(&again, "x:0", Tensor::FromVector<float>({-1, 3}));
  resp = Run(again);
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({-10, 300}), Fetched(*resp, 0));
  EXPECT_TENSOR_EQ(Tensor::FromVector<float>({-1, 3}), Fetched(*resp, 1));

  proto::RunStepRequest twice = Request(*handle, {"y"});
  Feed(&twice, "x", Tensor::FromVector<float>({1, 2}));
  Feed(&twice, "x:0", Tensor::FromVector<float>({3, 4}));
  resp = Run(twice);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument) << resp.status();
  EXPECT_TRUE(absl::StrContains(resp.status().message(), "Tensor 'x:0' is fed twice")) << resp.status();
}

TEST_F(MasterTest, ARetriedRequestIdRunsTheStepOnceAndGetsTheFirstAnswer) {
  proto::GraphDef g;
  On(kPs, AddVariable(&g, "counter", PartialShape::Scalar(), DT_INT64));
  AddConst(&g, "zero", Tensor::Scalar<int64_t>(0));
  AddConst(&g, "one", Tensor::Scalar<int64_t>(1));
  AddNode(&g, "init", "Assign", {"counter", "zero"});
  AddNode(&g, "incr", "AssignAdd", {"counter", "one"});  // on ps with the variable; `one` comes from worker 0
  On(kPs, AddNode(&g, "read", "Identity", {"counter"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {}, {"init"})).ok());

  proto::RunStepRequest req = Request(*handle, {"incr"});
  req.set_request_id(77);
  // The retry comes while the first is (almost surely) still building its
  // plan on the pool, so it waits for the first's answer; the late retry
  // comes after that answer.
  std::shared_ptr<StepCall> first = StartStep(master_.get(), req);
  std::shared_ptr<StepCall> retry = StartStep(master_.get(), req);
  ASSERT_TRUE(Answered(*first));
  ASSERT_TRUE(Answered(*retry));
  std::shared_ptr<StepCall> late_retry = StartStep(master_.get(), req);
  ASSERT_TRUE(Answered(*late_retry));
  for (StepCall* c : {first.get(), retry.get(), late_retry.get()}) {
    ASSERT_TRUE(c->status.ok()) << c->status;
    EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(1), Fetched(c->resp, 0));
  }
  absl::StatusOr<proto::RunStepResponse> read = Run(Request(*handle, {"read"}));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(1), Fetched(*read, 0)) << "three attempts of one request ran once";

  req.set_request_id(78);  // a new request runs
  absl::StatusOr<proto::RunStepResponse> next = Run(req);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(2), Fetched(*next, 0));
}

TEST_F(MasterTest, AFailureOnOneTaskAbortsTheStepOnEveryTaskAndNamesTheRootCause) {
  proto::GraphDef g;
  AddBarrier(&g, "hold_local", kWorker0);  // never released: holds until cancelled
  AddBarrier(&g, "hold_w1", kWorker1);
  On(kPs, AddVariable(&g, "uninit_w", PartialShape::Scalar(), DT_FLOAT));
  On(kPs, AddNode(&g, "read", "Identity", {"uninit_w"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();

  proto::RunStepRequest req = Request(*handle, {"hold_local", "hold_w1", "read"});
  Feed(&req, "hold_local_at", Tensor::Scalar<int64_t>(0));
  Feed(&req, "hold_w1_at", Tensor::Scalar<int64_t>(0));
  std::shared_ptr<StepCall> step = StartStep(master_.get(), req);
  ASSERT_TRUE(Answered(*step));
  const absl::Status& s = step->status;
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("[", kPs, "] "))) << "the task that failed first: " << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Node 'read' (Identity)")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "uninitialized variable 'uninit_w'")) << s;
  std::vector<Master::StepRecord> recent = master_->RecentSteps();
  ASSERT_EQ(recent.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(recent[0].status, "FAILED_PRECONDITION: ")) << recent[0].status;
  // The held partitions were aborted where they run, in memory and by RPC,
  // not only their calls cancelled.
  EXPECT_TRUE(BecomesIdle(WorkerOf(kWorker0)));
  EXPECT_TRUE(BecomesIdle(WorkerOf(kWorker1)));
  EXPECT_TRUE(BecomesIdle(WorkerOf(kPs)));
}

TEST_F(MasterTest, AStepPastItsDeadlineFailsWithDeadlineExceededNamingTheTask) {
  proto::GraphDef g;
  AddBarrier(&g, "hold", kWorker1);  // never released
  // The deadline comes from the request, or else from the session's config.
  proto::SessionConfig with_timeout;
  with_timeout.set_operation_timeout_ms(200);
  for (bool from_config : {false, true}) {
    SCOPED_TRACE(from_config ? "SessionConfig::operation_timeout_ms" : "RunStepRequest::timeout_ms");
    absl::StatusOr<std::string> handle = CreateSession(g, from_config ? with_timeout : proto::SessionConfig());
    ASSERT_TRUE(handle.ok()) << handle.status();
    proto::RunStepRequest req = Request(*handle, {"hold"});
    Feed(&req, "hold_at", Tensor::Scalar<int64_t>(0));
    if (!from_config) req.set_timeout_ms(200);
    absl::StatusOr<proto::RunStepResponse> resp = Run(req);
    ASSERT_FALSE(resp.ok());
    EXPECT_EQ(resp.status().code(), absl::StatusCode::kDeadlineExceeded) << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), "timed out after 200 ms")) << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), kWorker1)) << resp.status();
  }
}

TEST_F(MasterTest, ClosingASessionCancelsItsRunningStepBeforeReturning) {
  proto::GraphDef g;
  AddBarrier(&g, "hold_local", kWorker0);
  AddBarrier(&g, "hold_w1", kWorker1);
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {}, {"hold_local_init", "hold_w1_init"})).ok());
  // A step that passes the barriers builds the plan, so the held step below
  // starts (and is running) by the time RunStepAsync returns.
  auto held = [&](int64_t at) {
    proto::RunStepRequest req = Request(*handle, {"hold_local", "hold_w1"});
    Feed(&req, "hold_local_at", Tensor::Scalar<int64_t>(at));
    Feed(&req, "hold_w1_at", Tensor::Scalar<int64_t>(at));
    return req;
  };
  absl::StatusOr<proto::RunStepResponse> passes = Run(held(1));
  ASSERT_TRUE(passes.ok()) << passes.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<int64_t>(0), Fetched(*passes, 0));

  std::shared_ptr<StepCall> step = StartStep(master_.get(), held(0));
  ASSERT_TRUE(master_->CloseSession(*handle).ok());
  EXPECT_TRUE(step->done.HasBeenNotified()) << "Close returns once the session's steps have ended";
  ASSERT_TRUE(Answered(*step, absl::ZeroDuration()));
  EXPECT_EQ(step->status.code(), absl::StatusCode::kCancelled) << step->status;
  EXPECT_EQ(master_->num_sessions(), 0u);
  // Not only the master's wait ends: the partitions it started end too, on
  // its own task and on the remote one.
  EXPECT_TRUE(BecomesIdle(WorkerOf(kWorker0)));
  EXPECT_TRUE(BecomesIdle(WorkerOf(kWorker1)));
}

TEST_F(MasterTest, AStepStillBeingPlannedWhenItsSessionClosesIsCancelledAndRegistersNothing) {
  // A step's first run of a signature is planned on the master's pool. Here
  // the pool's one thread is busy until the session has closed, so the plan
  // is built after Close: it must not register partitions that nobody will
  // deregister, nor run the step on a closed session.
  proto::GraphDef g;
  On(Cpu(kWorker1), AddConst(&g, "remote", Tensor::Scalar<float>(1)));
  On(Cpu(kWorker0), AddNode(&g, "sum", "Add", {"remote", "remote"}));
  std::shared_ptr<MasterSession> session = MasterSession::Create(
      "planned_after_close", proto::SessionConfig(), workers_.get(), kWorker0, WorkerOf(kWorker0), /*bulk=*/nullptr);
  ASSERT_TRUE(session->Init(g).ok());
  const size_t registered0 = WorkerOf(kWorker0)->registered_graphs();
  const size_t registered1 = WorkerOf(kWorker1)->registered_graphs();

  ThreadPool pool("planner", 1);
  absl::Notification release;
  pool.Schedule([&release] { release.WaitForNotification(); });
  auto call = std::make_shared<StepCall>();
  call->req = Request("planned_after_close", {"sum"});
  session->RunAsync(&call->req, &call->resp, &pool, [call](absl::Status s) {
    if (call->answers.fetch_add(1) > 0) return;
    call->status = std::move(s);
    call->done.Notify();
  });
  EXPECT_FALSE(call->done.HasBeenNotified()) << "the plan waits for the pool: " << call->status;
  session->Close();
  release.Notify();
  ASSERT_TRUE(Answered(*call));
  EXPECT_EQ(call->status.code(), absl::StatusCode::kCancelled) << call->status;
  EXPECT_TRUE(absl::StrContains(call->status.message(), "'planned_after_close' was closed")) << call->status;
  EXPECT_EQ(WorkerOf(kWorker0)->registered_graphs(), registered0);
  EXPECT_EQ(WorkerOf(kWorker1)->registered_graphs(), registered1);
}

TEST_F(MasterTest, AClosedSessionIsRefusedNamingItsHandle) {
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(1));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {"a"})).ok());
  EXPECT_EQ(master_->num_sessions(), 1u);
  ASSERT_TRUE(master_->CloseSession(*handle).ok());
  EXPECT_EQ(master_->num_sessions(), 0u);

  absl::StatusOr<proto::RunStepResponse> resp = Run(Request(*handle, {"a"}));
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kNotFound) << resp.status();
  EXPECT_TRUE(absl::StrContains(resp.status().message(),
                                absl::StrCat("Session '", *handle, "' does not exist on ", kWorker0, " (closed")))
      << resp.status();
  proto::ExtendSessionRequest extend;
  extend.set_session_handle(*handle);
  AddConst(extend.mutable_graph_def(), "b", Tensor::Scalar<float>(2));
  absl::Status extended = master_->ExtendSession(extend);
  EXPECT_EQ(extended.code(), absl::StatusCode::kNotFound) << extended;
  EXPECT_TRUE(absl::StrContains(extended.message(), *handle)) << extended;
  EXPECT_TRUE(master_->CloseSession(*handle).ok()) << "closing twice is harmless";
}

TEST_F(MasterTest, CreateSessionPastTheMaxSessionsIsResourceExhaustedUntilOneCloses) {
  master_->set_max_sessions(2);
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(1));
  absl::StatusOr<std::string> first = CreateSession(g);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::string> second = CreateSession(g);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*first, *second);

  absl::StatusOr<std::string> third = CreateSession(g);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted) << third.status();
  EXPECT_TRUE(absl::StrContains(third.status().message(), absl::StrCat(kWorker0, " holds 2 sessions")))
      << third.status();
  EXPECT_TRUE(absl::StrContains(third.status().message(), "--max_sessions")) << third.status();
  EXPECT_EQ(master_->num_sessions(), 2u);

  ASSERT_TRUE(master_->CloseSession(*first).ok());
  absl::StatusOr<std::string> after_close = CreateSession(g);
  ASSERT_TRUE(after_close.ok()) << after_close.status();
  EXPECT_TRUE(Run(Request(*after_close, {"a"})).ok());
}

TEST_F(MasterTest, ASessionStillWaitingForTheClusterHoldsItsSlotUnderMaxSessions) {
  std::string address;  // the straggler's, not up yet
  absl::StatusOr<ClusterSpec> spec = WithStraggler(&address);
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache cache(*spec, "");
  Master master(kWorker0, &cache, WorkerOf(kWorker0));
  master.set_max_sessions(1);
  proto::GraphDef g;
  On(Cpu("/job:straggler/replica:0/task:0"), AddConst(&g, "a", Tensor::Scalar<float>(5)));
  proto::SessionConfig patient;
  patient.set_wait_for_tasks_ms(120000);
  proto::SessionConfig quick;
  quick.set_wait_for_tasks_ms(200);

  absl::StatusOr<std::string> first = absl::UnknownError("not returned");
  std::thread creating([&] { first = CreateSession(&master, g, patient); });
  // Whatever fails below, the waiting call is ended and joined.
  absl::Cleanup join = [&] {
    master.CloseAll();
    if (creating.joinable()) creating.join();
  };
  WaitUntil([&] { return master.sessions_being_created() > 0; }, kBound);
  ASSERT_EQ(master.sessions_being_created(), 1);
  // The first holds the only slot while it waits: a second is refused at
  // once rather than both going on to make two sessions.
  absl::StatusOr<std::string> second = CreateSession(&master, g, quick);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "holds 0 sessions and is creating 1 more"))
      << second.status();

  ServerOptions options;
  options.auth_token = "";
  options.bulk_transfer = false;
  options.heartbeat_timeout_ms = 0;
  absl::StatusOr<ClusterSpec> alone = ClusterSpec::Parse("straggler|" + address);
  ASSERT_TRUE(alone.ok()) << alone.status();
  absl::StatusOr<std::unique_ptr<Server>> straggler = Server::Create(*alone, "straggler", 0, options);
  ASSERT_TRUE(straggler.ok()) << straggler.status();
  ASSERT_TRUE((*straggler)->Start().ok());
  creating.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(master.sessions_being_created(), 0);
  second = CreateSession(&master, g, quick);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "holds 1 sessions,")) << second.status();
  ASSERT_TRUE(master.CloseSession(*first).ok());
  second = CreateSession(&master, g, quick);
  EXPECT_TRUE(second.ok()) << "closing the first freed its slot: " << second.status();
}

TEST_F(MasterTest, ExtendAddsNodesAndABadExtensionChangesNothing) {
  proto::GraphDef g;
  On(kPs, AddConst(&g, "a", Tensor::Scalar<float>(2)));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();

  proto::ExtendSessionRequest good;
  good.set_session_handle(*handle);
  On(kWorker1, AddNode(good.mutable_graph_def(), "b", "Mul", {"a", "a"}));
  ASSERT_TRUE(master_->ExtendSession(good).ok());
  absl::StatusOr<proto::RunStepResponse> resp = Run(Request(*handle, {"b"}));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(4), Fetched(*resp, 0));

  // `c` is fine, `d` is not: neither is added.
  proto::ExtendSessionRequest bad;
  bad.set_session_handle(*handle);
  AddConst(bad.mutable_graph_def(), "c", Tensor::Scalar<float>(1));
  AddNode(bad.mutable_graph_def(), "d", "Add", {"c", "missing"});
  absl::Status extended = master_->ExtendSession(bad);
  EXPECT_EQ(extended.code(), absl::StatusCode::kInvalidArgument) << extended;
  EXPECT_TRUE(absl::StrContains(extended.message(), "Node 'd' (Add)")) << extended;
  EXPECT_TRUE(absl::StrContains(extended.message(), "'missing'")) << extended;

  resp = Run(Request(*handle, {"c"}));
  ASSERT_FALSE(resp.ok()) << "'c' was not added";
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kNotFound) << resp.status();
  EXPECT_TRUE(absl::StrContains(resp.status().message(), "Fetch 'c' is not in the graph")) << resp.status();
  resp = Run(Request(*handle, {"b"}));
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(4), Fetched(*resp, 0));
}

TEST_F(MasterTest, AbortStepsOnTaskFailsOnlyTheStepsWithAPartitionThere) {
  proto::GraphDef g;
  AddBarrier(&g, "hold_w1", kWorker1);
  AddBarrier(&g, "hold_ps", kPs);
  AddBarrier(&g, "hold_local", kWorker0);
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {}, {"hold_w1_init", "hold_ps_init", "hold_local_init"})).ok());
  auto on_w1_and_ps = [&](int64_t at) {
    proto::RunStepRequest req = Request(*handle, {"hold_w1", "hold_ps"});
    Feed(&req, "hold_w1_at", Tensor::Scalar<int64_t>(at));
    Feed(&req, "hold_ps_at", Tensor::Scalar<int64_t>(at));
    return req;
  };
  auto on_worker0 = [&](int64_t at) {
    proto::RunStepRequest req = Request(*handle, {"hold_local"});
    Feed(&req, "hold_local_at", Tensor::Scalar<int64_t>(at));
    return req;
  };
  // Passing steps build both plans, so the held steps are running when
  // RunStepAsync returns.
  ASSERT_TRUE(Run(on_w1_and_ps(1)).ok());
  ASSERT_TRUE(Run(on_worker0(1)).ok());

  std::shared_ptr<StepCall> involved = StartStep(master_.get(), on_w1_and_ps(0));
  std::shared_ptr<StepCall> bystander = StartStep(master_.get(), on_worker0(0));
  const absl::Status why = absl::UnavailableError(absl::StrCat(kWorker1, " was declared dead by the test"));
  master_->AbortStepsOnTask(kWorker1, why);
  ASSERT_TRUE(Answered(*involved));
  EXPECT_EQ(involved->status, why) << "the given reason, not the cancellations it caused";
  EXPECT_TRUE(BecomesIdle(WorkerOf(kPs))) << "its partition on a live task was aborted too";
  EXPECT_FALSE(bystander->done.HasBeenNotified()) << "a step with no partition on the dead task runs on";

  ASSERT_TRUE(master_->CloseSession(*handle).ok());
  ASSERT_TRUE(Answered(*bystander));
  EXPECT_EQ(bystander->status.code(), absl::StatusCode::kCancelled) << bystander->status;
}

// A task that takes calls and never answers RegisterGraph (a hung process,
// a connection to a host that is gone): every other call goes to `real`;
// a registration answers only when it is cancelled, as a transport's would.
class SilentRegistration final : public WorkerInterface {
 public:
  explicit SilentRegistration(std::shared_ptr<WorkerInterface> real) : real_(std::move(real)) {}
  void GetStatusAsync(proto::GetStatusResponse* resp, StatusCallback done) override {
    real_->GetStatusAsync(resp, std::move(done));
  }
  void RegisterGraphAsync(CallOptions* opts, const proto::RegisterGraphRequest*, proto::RegisterGraphResponse*,
                          StatusCallback done) override {
    calls.fetch_add(1);
    if (opts == nullptr) return;  // never answers
    opts->SetCancelCallback([done = std::move(done)] { done(absl::CancelledError("the registration was cancelled")); });
  }
  void DeregisterGraphAsync(const proto::DeregisterGraphRequest* req, StatusCallback done) override {
    real_->DeregisterGraphAsync(req, std::move(done));
  }
  void RunGraphAsync(CallOptions* opts, RunGraphCall* call, StatusCallback done) override {
    real_->RunGraphAsync(opts, call, std::move(done));
  }
  void CleanupGraphAsync(const proto::CleanupGraphRequest* req, StatusCallback done) override {
    real_->CleanupGraphAsync(req, std::move(done));
  }
  void RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                       Rendezvous::DoneCallback done) override {
    real_->RecvTensorAsync(step_id, key, cm, std::move(done));
  }
  std::atomic<int> calls{0};

 private:
  std::shared_ptr<WorkerInterface> real_;
};

TEST_F(MasterTest, ARegistrationThatNeverAnswersEndsOnCloseOrTheTasksDeathAndIsLoggedAsStalled) {
  // Before, the plan was registered under the session's lock with no
  // deadline: such a task hung the step, and Close (a supervisor recreating
  // its session) waited for it for ever.
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJobs(jobs_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache cache(*spec, "");
  absl::StatusOr<std::shared_ptr<WorkerInterface>> real = workers_->GetWorker(kWorker1);
  ASSERT_TRUE(real.ok()) << real.status();
  auto silent = std::make_shared<SilentRegistration>(*real);
  cache.SetLocalWorker(kWorker1, silent);
  proto::GraphDef g;
  On(Cpu(kWorker1), AddConst(&g, "remote", Tensor::Scalar<float>(1)));
  On(Cpu(kWorker0), AddNode(&g, "sum", "Add", {"remote", "remote"}));
  ThreadPool pool("planner", 2);
  for (const bool by_death : {true, false}) {
    SCOPED_TRACE(by_death ? "the task dies" : "the session closes");
    const std::string handle = by_death ? "silent_task_dies" : "silent_session_closes";
    std::shared_ptr<MasterSession> session =
        MasterSession::Create(handle, proto::SessionConfig(), &cache, kWorker0, nullptr, /*bulk=*/nullptr);
    ASSERT_TRUE(session->Init(g).ok());
    const size_t registered0 = WorkerOf(kWorker0)->registered_graphs();
    const int calls_before = silent->calls.load();
    auto call = std::make_shared<StepCall>();
    call->req = Request(handle, {"sum"});
    session->RunAsync(&call->req, &call->resp, &pool, [call](absl::Status s) {
      if (call->answers.fetch_add(1) > 0) return;
      call->status = std::move(s);
      call->done.Notify();
    });
    WaitUntil([&] { return silent->calls.load() != calls_before; }, kBound);
    ASSERT_GT(silent->calls.load(), calls_before) << "the step never registered its partition";

    testing::internal::CaptureStderr();
    session->LogStalledSteps(absl::ZeroDuration());
    const std::string logged = testing::internal::GetCapturedStderr();
    EXPECT_TRUE(absl::StrContains(logged, absl::StrCat("for ", kWorker1, " to register its partition"))) << logged;

    absl::Notification closed;
    std::thread closer;
    if (by_death) {
      session->AbortStepsOnTask(kWorker1, absl::UnavailableError("worker 1 was declared dead by the test"));
    } else {
      closer = std::thread([&] {
        session->Close();
        closed.Notify();
      });
    }
    ASSERT_TRUE(Answered(*call));
    if (by_death) {
      EXPECT_EQ(call->status.code(), absl::StatusCode::kUnavailable) << call->status;
      EXPECT_TRUE(absl::StrContains(call->status.message(), absl::StrCat("Registering the partition for ", kWorker1,
                                                                         ": worker 1 was declared dead by the test")))
          << call->status;
      // The partition that did register (worker 0's) was deregistered.
      EXPECT_EQ(WorkerOf(kWorker0)->registered_graphs(), registered0);
      session->Close();
    } else {
      EXPECT_EQ(call->status.code(), absl::StatusCode::kCancelled) << call->status;
      EXPECT_TRUE(closed.WaitForNotificationWithTimeout(kBound)) << "Close waited for the registration";
      closer.join();
      EXPECT_EQ(WorkerOf(kWorker0)->registered_graphs(), registered0);
    }
  }
}

TEST_F(MasterTest, ResetClearsVariablesOnlyOnTheTasksItsFiltersPass) {
  proto::GraphDef g;
  const std::vector<std::pair<std::string, std::string>> vars = {{kPs, "ps"}, {kWorker1, "w1"}};
  for (const auto& [task, suffix] : vars) {
    On(task, AddVariable(&g, "w_" + suffix, PartialShape::Scalar(), DT_FLOAT));
    AddConst(&g, "seven_" + suffix, Tensor::Scalar<float>(7));
    AddNode(&g, "init_" + suffix, "Assign", {"w_" + suffix, "seven_" + suffix});
    On(task, AddNode(&g, "read_" + suffix, "Identity", {"w_" + suffix}));
  }
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {}, {"init_ps", "init_w1"})).ok());
  auto expect_uninitialized = [&](const std::string& suffix, const std::string& task) {
    absl::StatusOr<proto::RunStepResponse> resp = Run(Request(*handle, {"read_" + suffix}));
    ASSERT_FALSE(resp.ok()) << "w_" << suffix << " was reset";
    EXPECT_EQ(resp.status().code(), absl::StatusCode::kFailedPrecondition) << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), "uninitialized variable 'w_" + suffix + "'"))
        << resp.status();
    EXPECT_TRUE(absl::StrContains(resp.status().message(), task)) << resp.status();
  };

  proto::ResetRequest only_ps;
  only_ps.add_device_filters("/job:ps");
  ASSERT_TRUE(master_->Reset(only_ps).ok());
  expect_uninitialized("ps", kPs);
  absl::StatusOr<proto::RunStepResponse> kept = Run(Request(*handle, {"read_w1"}));
  ASSERT_TRUE(kept.ok()) << "the worker was not reset: " << kept.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(7), Fetched(*kept, 0));

  ASSERT_TRUE(master_->Reset(proto::ResetRequest()).ok());  // no filters, no containers: everything
  expect_uninitialized("w1", kWorker1);
}

TEST_F(MasterTest, ResetWithATaskDownResetsEveryOtherTaskAndNamesTheOneThatFailed) {
  proto::GraphDef g;
  On(kWorker1, AddVariable(&g, "w", PartialShape::Scalar(), DT_FLOAT));
  AddConst(&g, "seven", Tensor::Scalar<float>(7));
  AddNode(&g, "init", "Assign", {"w", "seven"});
  On(kWorker1, AddNode(&g, "read", "Identity", {"w"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(Run(Request(*handle, {}, {"init"})).ok());
  for (const auto& s : servers_)
    if (s->task_name() == kPs) s->Stop();  // the first task Reset asks

  absl::Status reset = master_->Reset(proto::ResetRequest());
  EXPECT_EQ(reset.code(), absl::StatusCode::kUnavailable) << reset;
  EXPECT_TRUE(absl::StrContains(reset.message(), "Reset failed on 1 of 3 task(s) (the others were reset)")) << reset;
  EXPECT_TRUE(absl::StrContains(reset.message(), absl::StrCat(kPs, ": "))) << reset;
  absl::StatusOr<proto::RunStepResponse> read = Run(Request(*handle, {"read"}));
  ASSERT_FALSE(read.ok()) << "worker 1 was not reset";
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "uninitialized variable 'w'")) << read.status();
}

TEST_F(MasterTest, ATaskThatIsNotUpIsLeftOutOfListDevicesAndNamedByCreateSession) {
  std::string address;  // nothing listens there
  absl::StatusOr<ClusterSpec> spec = WithStraggler(&address);
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache cache(*spec, "");
  Master master(kWorker0, &cache, WorkerOf(kWorker0));

  proto::ListDevicesResponse devices;
  ASSERT_TRUE(master.ListDevices(&devices).ok());
  std::vector<std::string> names;
  for (const proto::DeviceAttributes& d : devices.devices()) {
    names.push_back(d.name());
    EXPECT_EQ(d.device_type(), "CPU");
  }
  EXPECT_EQ(names, (std::vector<std::string>{Cpu(kPs), Cpu(kWorker0), Cpu(kWorker1)}));

  proto::GraphDef g;
  On(kPs, AddConst(&g, "a", Tensor::Scalar<float>(5)));
  proto::SessionConfig config;
  config.set_wait_for_tasks_ms(300);
  absl::StatusOr<std::string> refused = CreateSession(&master, g, config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "/job:straggler/replica:0/task:0 at " + address))
      << refused.status();
  EXPECT_EQ(master.num_sessions(), 0u);

  // Filters that leave it out do not wait for it.
  config.add_device_filters("/job:ps");
  config.add_device_filters("/job:worker");
  absl::StatusOr<std::string> handle = CreateSession(&master, g, config);
  ASSERT_TRUE(handle.ok()) << handle.status();
  std::shared_ptr<StepCall> step = StartStep(&master, Request(*handle, {"a"}));
  ASSERT_TRUE(Answered(*step));
  ASSERT_TRUE(step->status.ok()) << step->status;
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(5), Fetched(step->resp, 0));
}

}  // namespace
}  // namespace distflow

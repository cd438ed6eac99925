// The master's steps (master.cc, master_step.cc), driven directly through a
// Master object (master_test_fixture.h): steps over partitions on three tasks
// (fetches in request order, feeds, traces), a retried request id that runs
// once, a failure on one task aborting the step on every task (a failed
// step answered only once every task was told, the ps partition that only
// sends included), deadlines, and the steps a task's death fails (and those
// it does not).
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "master/master_test_fixture.h"

namespace distflow::master_test {
namespace {

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

// The ps's partition only sends (it holds, then would send to worker 1), so
// the step's answer does not wait for it when the step succeeds. When the
// step fails on worker 0 (its queue is closed under its dequeue), worker 1
// is cancelled before receiving, and the ps partition still runs: the
// answer comes only once the ps has been told to abort the step, so the
// client's next step never runs beside it. Told, the ps no longer holds
// worker 1's receive of what the partition would send.
TEST_F(MasterTest, AFailedStepAnswersOnlyOnceItsPartitionThatOnlySendsIsAborted) {
  proto::GraphDef g;
  AddBarrier(&g, "hold_ps", kPs);  // never released
  On(kWorker1, AddNode(&g, "on_w1", "Identity", {"hold_ps"}));
  proto::NodeDef* queue = On(kWorker0, AddNode(&g, "q", "FIFOQueue", {}));
  SetAttrTypeList(queue, "component_types", {DT_FLOAT});
  SetAttrString(queue, "shared_name", "q");
  SetAttrTypeList(On(kWorker0, AddNode(&g, "dequeue", "QueueDequeue", {"q"})), "component_types", {DT_FLOAT});
  On(kWorker0, AddNode(&g, "close", "QueueClose", {"q"}));
  absl::StatusOr<std::string> handle = CreateSession(g);
  ASSERT_TRUE(handle.ok()) << handle.status();

  proto::RunStepRequest req = Request(*handle, {"on_w1", "dequeue"});
  Feed(&req, "hold_ps_at", Tensor::Scalar<int64_t>(0));
  std::shared_ptr<StepCall> step = StartStep(master_.get(), req);
  WorkerRendezvous* ps = WorkerOf(kPs)->rendezvous();
  ASSERT_TRUE(WaitUntil([&] { return ps->NumPendingForTest() == 1; }, kBound)) << "worker 1 waits for the ps";
  ASSERT_TRUE(Run(Request(*handle, {}, {"close"})).ok());
  ASSERT_TRUE(Answered(*step));
  const size_t held = ps->NumPendingForTest();
  EXPECT_EQ(step->status.code(), absl::StatusCode::kOutOfRange) << step->status;
  EXPECT_TRUE(absl::StartsWith(step->status.message(), absl::StrCat("[", kWorker0, "] "))) << step->status;
  EXPECT_EQ(held, 0u) << "the step was answered before the ps, whose partition only sends, was told to abort it";
  EXPECT_TRUE(BecomesIdle(WorkerOf(kPs)));
  EXPECT_TRUE(BecomesIdle(WorkerOf(kWorker1)));
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

}  // namespace
}  // namespace distflow::master_test

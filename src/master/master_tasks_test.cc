// The master and tasks that are not well (master.cc, master_session.cc),
// driven directly through a Master object (master_test_fixture.h): a
// registration that never answers (ended by Close and by the task's death,
// and logged as stalled), Reset (only the tasks its filters pass; every task
// asked even when one is down), and ListDevices and CreateSession with a
// task that is not up.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "master/master_session.h"
#include "master/master_test_fixture.h"

namespace distflow::master_test {
namespace {

// A task that takes calls and never answers RegisterGraph (a hung process,
// a connection to a host that is gone): every other call goes to `real`;
// a registration answers only when it is cancelled, as a transport's would.
class SilentRegistration final : public WorkerInterface {
 public:
  explicit SilentRegistration(std::shared_ptr<WorkerInterface> real) : real_(std::move(real)) {}
  void GetStatusAsync(CallOptions* opts, proto::GetStatusResponse* resp, StatusCallback done) override {
    real_->GetStatusAsync(opts, resp, std::move(done));
  }
  void RegisterGraphAsync(CallOptions* opts, const proto::RegisterGraphRequest*, proto::RegisterGraphResponse*,
                          StatusCallback done) override {
    calls.fetch_add(1);
    if (opts == nullptr) return;  // never answers
    if (hold_after_cancel) {
      // A transport slow to answer a cancelled call: the answer comes when the test says.
      absl::MutexLock lock(&mu);
      held = std::move(done);
      return;
    }
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
  void CleanupAllAsync(CallOptions* opts, const proto::CleanupAllRequest* req, StatusCallback done) override {
    real_->CleanupAllAsync(opts, req, std::move(done));
  }
  void ShutdownAsync(CallOptions* opts, const proto::ShutdownRequest* req, StatusCallback done) override {
    real_->ShutdownAsync(opts, req, std::move(done));
  }
  void RecvTensorAsync(int64_t step_id, const std::string& key, CancellationManager* cm,
                       Rendezvous::DoneCallback done) override {
    real_->RecvTensorAsync(step_id, key, cm, std::move(done));
  }
  std::atomic<int> calls{0};
  bool hold_after_cancel = false;  // set before the first call
  absl::Mutex mu;
  StatusCallback held ABSL_GUARDED_BY(mu);

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

// The heartbeat aborts the steps on a dead task at every beat while it
// stays dead: a registration still waiting for its call to end is said to
// fail once, not once per heartbeat.
TEST_F(MasterTest, ARegistrationOnADeadTaskIsLoggedAsFailingOnceThoughTheHeartbeatAbortsItAgain) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJobs(jobs_);
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache cache(*spec, "");
  absl::StatusOr<std::shared_ptr<WorkerInterface>> real = workers_->GetWorker(kWorker1);
  ASSERT_TRUE(real.ok()) << real.status();
  auto silent = std::make_shared<SilentRegistration>(*real);
  silent->hold_after_cancel = true;
  cache.SetLocalWorker(kWorker1, silent);
  proto::GraphDef g;
  On(Cpu(kWorker1), AddConst(&g, "remote", Tensor::Scalar<float>(1)));
  On(Cpu(kWorker0), AddNode(&g, "sum", "Add", {"remote", "remote"}));
  ThreadPool pool("planner", 2);
  std::shared_ptr<MasterSession> session =
      MasterSession::Create("dead_task_beats", proto::SessionConfig(), &cache, kWorker0, nullptr, /*bulk=*/nullptr);
  ASSERT_TRUE(session->Init(g).ok());
  auto call = std::make_shared<StepCall>();
  call->req = Request("dead_task_beats", {"sum"});
  session->RunAsync(&call->req, &call->resp, &pool, [call](absl::Status s) {
    if (call->answers.fetch_add(1) > 0) return;
    call->status = std::move(s);
    call->done.Notify();
  });
  WaitUntil([&] { return silent->calls.load() > 0; }, kBound);
  ASSERT_GT(silent->calls.load(), 0) << "the step never registered its partition";

  testing::internal::CaptureStderr();
  for (int beat = 0; beat < 3; ++beat) {
    session->AbortStepsOnTask(kWorker1, absl::UnavailableError("worker 1 was declared dead by the test"));
  }
  const std::string logged = testing::internal::GetCapturedStderr();
  const std::string line = absl::StrCat("Registering a partition of session dead_task_beats on ", kWorker1, " fails");
  size_t count = 0;
  for (size_t at = logged.find(line); at != std::string::npos; at = logged.find(line, at + 1)) ++count;
  EXPECT_EQ(count, 1u) << logged;

  WorkerInterface::StatusCallback answer;
  {
    absl::MutexLock lock(&silent->mu);
    answer = std::move(silent->held);
  }
  ASSERT_TRUE(answer != nullptr);
  answer(absl::CancelledError("the registration was cancelled"));
  ASSERT_TRUE(Answered(*call));
  EXPECT_EQ(call->status.code(), absl::StatusCode::kUnavailable) << call->status;
  EXPECT_TRUE(absl::StrContains(call->status.message(), "worker 1 was declared dead by the test")) << call->status;
  session->Close();
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
}  // namespace distflow::master_test

// The master's sessions (master.cc, master_session.cc), driven directly
// through a Master object (master_test_fixture.h): closing a session cancels
// its running step, a step still being planned when its session closes, a
// closed session refused by name, the max-sessions limit (sessions still
// waiting for the cluster included), and Extend.
#include "master/master_session.h"

#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "master/master_test_fixture.h"

namespace distflow::master_test {
namespace {

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

}  // namespace
}  // namespace distflow::master_test

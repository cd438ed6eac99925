// The client side of grpc:// sessions (grpc_session.cc) on its own: the
// targets it takes, how long it waits where nothing listens, values in the
// order asked, refusals before a graph and after Close, a Close that ends an
// Extend still waiting for the cluster, deadlines and remote errors, both
// calling an in-process master directly and over gRPC. Every
// server is real, in this process, on 127.0.0.1.
//
// Steps that must stay running wait in a SyncBarrierWait op whose barrier is
// never released and whose own timeout (kHoldMs) is far beyond any bound
// the tests wait for: an answer means the step's deadline ended it.
#include "server/grpc_session.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/metrics.h"
#include "base/ports.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"
#include "master/master.h"
#include "runtime/graph_def_builder_for_test.h"
#include "server/grpc_server.h"
#include "server/session_test_util.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddHold;
using test::AddNode;
using test::AddPlaceholder;
using test::AddVariable;
using test::BoundedOptions;
using test::LeanOptions;
using test::NewSession;
using test::OneConst;
using test::StartOneTask;

constexpr char kWorker0[] = "/job:worker/replica:0/task:0";

TEST(GrpcSession, CreateRefusesATargetThatIsNotGrpcHostPort) {
  for (const char* target : {"localhost:2222", "grpc://", "http://127.0.0.1:2222"}) {
    absl::StatusOr<std::unique_ptr<GrpcSession>> session = GrpcSession::Create(target, SessionOptions());
    ASSERT_FALSE(session.ok()) << target;
    EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument) << session.status();
    EXPECT_TRUE(absl::StrContains(session.status().message(), absl::StrCat("'", target, "'"))) << session.status();
    EXPECT_TRUE(absl::StrContains(session.status().message(), "grpc://host:port")) << session.status();
  }
}

TEST(GrpcSession, WhereNothingListensExtendIsUnavailableNamingTheAddressWithinItsWait) {
  absl::StatusOr<int> port = PickUnusedTcpPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  SessionOptions o;
  o.wait_for_cluster_ms = 500;
  std::unique_ptr<GrpcSession> session = NewSession("grpc://" + address, o);
  ASSERT_NE(session, nullptr);
  const absl::Time start = absl::Now();
  absl::Status s = session->Extend(OneConst("c", 1));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), address)) << s;
  EXPECT_LT(took, absl::Seconds(30)) << "bounded by the 0.5 s wait, not the default 300 s";
  absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"c"}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << "no session was made: " << out.status();
}

// The cases below run twice: calling the server's master in this process
// directly, and over gRPC as a client in another process would.
class GrpcSessionTest : public ::testing::TestWithParam<bool> {
 protected:
  void StartServer(const ServerOptions& options = LeanOptions()) {
    server_ = StartOneTask(options);
    ASSERT_NE(server_, nullptr);
  }
  // A session on the server, calling its master in process or over gRPC as the parameter says.
  std::unique_ptr<GrpcSession> Client() { return Client(BoundedOptions(GetParam())); }
  std::unique_ptr<GrpcSession> Client(SessionOptions options) {
    options.in_process_master = GetParam();
    return NewSession(server_->target(), options);
  }
  std::unique_ptr<Server> server_;
};

INSTANTIATE_TEST_SUITE_P(ClientPath, GrpcSessionTest, ::testing::Bool(), [](const ::testing::TestParamInfo<bool>& i) {
  return i.param ? "InProcessMaster" : "OverGrpc";
});

TEST_P(GrpcSessionTest, RunAnswersEveryFetchInTheOrderAskedAndSeesExtendedNodes) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(2));
  AddConst(&g, "b", Tensor::Scalar<float>(3));
  AddPlaceholder(&g, "x", DT_FLOAT, PartialShape::Scalar());
  AddNode(&g, "sum", "Add", {"a", "b"});
  AddNode(&g, "prod", "Mul", {"x", "b"});
  std::unique_ptr<GrpcSession> session = Client();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Extend(g).ok());
  absl::StatusOr<std::vector<Tensor>> out =
      session->Run(RunOptions(), {{"x", Tensor::Scalar<float>(4)}}, {"prod", "sum", "a"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(12), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(5), (*out)[1]);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(2), (*out)[2]);
  // Another signature, another feed.
  out = session->Run(RunOptions(), {{"x", Tensor::Scalar<float>(-1)}}, {"sum", "prod"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(5), (*out)[0]);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(-3), (*out)[1]);
  // A node added by a later Extend.
  proto::GraphDef more;
  AddNode(&more, "diff", "Sub", {"sum", "a"});
  ASSERT_TRUE(session->Extend(more).ok());
  out = session->Run(RunOptions(), {}, {"diff"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(3), (*out)[0]);
}

TEST_P(GrpcSessionTest, RunWithoutAGraphOrAfterCloseIsRefusedAndCloseFreesTheTasksSession) {
  ServerOptions options = LeanOptions();
  options.max_sessions = 1;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  const proto::GraphDef g = OneConst("c", 5);
  std::unique_ptr<GrpcSession> first = Client();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::vector<Tensor>> early = first->Run(RunOptions(), {}, {"c"}, {});
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();
  EXPECT_TRUE(absl::StrContains(early.status().message(), "no graph")) << early.status();
  ASSERT_TRUE(first->Extend(g).ok());
  ASSERT_TRUE(first->Run(RunOptions(), {}, {"c"}, {}).ok());
  {
    std::unique_ptr<GrpcSession> second = Client();
    ASSERT_NE(second, nullptr);
    absl::Status s = second->Extend(g);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << "the first holds the task's only session: " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "--max_sessions")) << s;
  }

  ASSERT_TRUE(first->Close().ok());
  EXPECT_TRUE(first->Close().ok()) << "a second Close is harmless";
  absl::StatusOr<std::vector<Tensor>> after = first->Run(RunOptions(), {}, {"c"}, {});
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition) << after.status();
  EXPECT_TRUE(absl::StrContains(after.status().message(), "closed")) << after.status();
  absl::Status extend = first->Extend(g);
  EXPECT_EQ(extend.code(), absl::StatusCode::kFailedPrecondition) << extend;
  EXPECT_TRUE(absl::StrContains(extend.message(), "closed")) << extend;

  std::unique_ptr<GrpcSession> third = Client();
  ASSERT_NE(third, nullptr);
  absl::Status s = third->Extend(g);
  ASSERT_TRUE(s.ok()) << "closing the first freed the task's only session: " << s;
  absl::StatusOr<std::vector<Tensor>> out = third->Run(RunOptions(), {}, {"c"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 5.f);
}

TEST_P(GrpcSessionTest, ACloseEndsAnExtendStillWaitingForTheClusterAndLeavesNoSessionBehind) {
  // Worker 0 (the master) is up; worker 1 is not, so creating a session
  // waits for it. The task holds one session at most: one left behind by
  // the closed client would keep every later client out.
  absl::StatusOr<int> port0 = PickUnusedTcpPort();
  absl::StatusOr<int> port1 = PickUnusedTcpPort();
  ASSERT_TRUE(port0.ok() && port1.ok());
  const std::string jobs = absl::StrCat("worker|127.0.0.1:", *port0, ";127.0.0.1:", *port1);
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(jobs);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ServerOptions options = LeanOptions();
  options.max_sessions = 1;
  absl::StatusOr<std::unique_ptr<Server>> w0 = Server::Create(*spec, "worker", 0, options);
  ASSERT_TRUE(w0.ok()) << w0.status();
  server_ = std::move(*w0);
  ASSERT_TRUE(server_->Start().ok());

  SessionOptions waits = BoundedOptions(GetParam());
  waits.wait_for_cluster_ms = 120000;
  std::unique_ptr<GrpcSession> session = Client(waits);
  ASSERT_NE(session, nullptr);
  absl::Status extended;
  absl::Notification extend_returned;
  std::thread extend([&] {
    extended = session->Extend(OneConst("c", 1));
    extend_returned.Notify();
  });
  // Once the Extend waits for the cluster (the master holds a session in the
  // making), the calls below must not wait behind it.
  ASSERT_TRUE(WaitUntil([&] { return server_->impl()->master()->sessions_being_created() > 0; }, absl::Seconds(60)));
  EXPECT_FALSE(extend_returned.HasBeenNotified()) << "worker 1 is down: " << extended;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<Tensor>> early = session->Run(RunOptions(), {}, {"c"}, {});
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();
  EXPECT_TRUE(absl::StrContains(early.status().message(), "no graph")) << early.status();
  EXPECT_TRUE(session->Close().ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "Run and Close waited behind the Extend";
  if (!GetParam()) {
    // Over gRPC, Close cancels the call: the Extend ends without worker 1.
    EXPECT_TRUE(extend_returned.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }

  // Worker 1 comes up: an in-process master then finishes the session, which
  // the Extend closes; a master called over gRPC closes it itself, its
  // caller having gone.
  Counter* abandoned = Metrics::Global()->GetCounter("distflow_sessions_abandoned_total", "");
  const double abandoned_before = abandoned->value();
  absl::StatusOr<std::unique_ptr<Server>> w1 = Server::Create(*spec, "worker", 1, options);
  ASSERT_TRUE(w1.ok()) << w1.status();
  ASSERT_TRUE((*w1)->Start().ok());
  ASSERT_TRUE(extend_returned.WaitForNotificationWithTimeout(absl::Seconds(60)));
  extend.join();
  EXPECT_EQ(extended.code(), absl::StatusCode::kFailedPrecondition) << extended;
  EXPECT_TRUE(absl::StrContains(extended.message(), "closed")) << extended;
  if (!GetParam()) {
    // The master finishes making the session its caller gave up on, then closes it.
    WaitUntil([&] { return abandoned->value() != abandoned_before; }, absl::Seconds(60));
    EXPECT_EQ(abandoned->value(), abandoned_before + 1) << "the master kept a session its caller gave up on";
  }

  std::unique_ptr<GrpcSession> next = Client();
  ASSERT_NE(next, nullptr);
  absl::Status made = next->Extend(OneConst("c", 2));
  ASSERT_TRUE(made.ok()) << "the closed client's session was left on the task: " << made;
  absl::StatusOr<std::vector<Tensor>> out = next->Run(RunOptions(), {}, {"c"}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 2.f);
}

TEST_P(GrpcSessionTest, AStepPastItsDeadlineIsDeadlineExceededAndTheSessionGoesOn) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  proto::GraphDef g;
  AddHold(&g, "held_by_run_options");
  AddHold(&g, "held_by_session_options");

  std::unique_ptr<GrpcSession> session = Client();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Extend(g).ok());
  RunOptions ro;
  ro.timeout_ms = 300;  // over the session's 60 s
  absl::StatusOr<std::vector<Tensor>> out = session->Run(ro, {}, {"held_by_run_options"}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "timed out after 300 ms")) << out.status();
  out = session->Run(RunOptions(), {}, {"held_by_run_options_step"}, {});
  ASSERT_TRUE(out.ok()) << "the session still runs steps: " << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 0);

  // Without a RunOptions timeout, the session's own applies.
  SessionOptions o = BoundedOptions(GetParam());
  o.operation_timeout_ms = 200;
  std::unique_ptr<GrpcSession> short_lived = Client(o);
  ASSERT_NE(short_lived, nullptr);
  ASSERT_TRUE(short_lived->Extend(g).ok());
  out = short_lived->Run(RunOptions(), {}, {"held_by_session_options"}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "timed out after 200 ms")) << out.status();
}

TEST_P(GrpcSessionTest, AStepsErrorKeepsItsCodeAndNamesTheTaskAndWhatFailed) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  proto::GraphDef g;
  AddVariable(&g, "never_assigned", PartialShape({2}), DT_FLOAT);
  AddNode(&g, "read", "Identity", {"never_assigned"});
  AddConst(&g, "fine", Tensor::Scalar<float>(1));
  std::unique_ptr<GrpcSession> session = Client();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Extend(g).ok());

  absl::StatusOr<std::vector<Tensor>> out = session->Run(RunOptions(), {}, {"read"}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), kWorker0)) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "uninitialized variable 'never_assigned'")) << out.status();

  out = session->Run(RunOptions(), {}, {"no_such_node"}, {});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "Fetch 'no_such_node' is not in the graph")) << out.status();

  out = session->Run(RunOptions(), {}, {"fine"}, {});
  ASSERT_TRUE(out.ok()) << "the session still runs steps: " << out.status();
}

}  // namespace
}  // namespace distflow

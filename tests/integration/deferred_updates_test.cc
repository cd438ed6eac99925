// Deferred variable updates (distflow/train/defer_updates.h) on a cluster of
// real gRPC servers in this process, 1 ps + 1 worker, driven through a
// grpc:// session on the worker as the book's program drives it.
//
// The model is a counter trained like a weight: v on the ps; the worker
// reads it ("seen") and computes an increment of 1 from it (the
// "gradient"), which passes a gate on the ps before AssignAdd adds it to
// v. The gate (a test op, stateless, so deferrable) holds every value until
// the test opens it, so whatever happens while it is closed cannot depend
// on the update: no assertion here depends on timing.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/wait_until.h"
#include "distflow/distflow.h"
#include "distflow/train/defer_updates.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/saver.h"
#include "distflow/train/supervisor.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "server/grpc_server.h"
#include "worker/worker.h"

namespace distflow {
namespace {

// Holds its input until Release (with an error: fails instead); cancelling
// the step ends the wait.
class Gate {
 public:
  static Gate& Get() {
    static Gate* g = new Gate;
    return *g;
  }
  void Hold(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done) {
    auto fire = std::make_shared<Held>();
    fire->ctx = ctx;
    fire->done = std::move(done);
    {
      absl::MutexLock lock(&mu_);
      held_.push_back(fire);
    }
    CancellationManager::Token t = ctx->cancellation_manager()->Register(
        [fire] { fire->Fire(absl::CancelledError("the gate's step was cancelled")); });
    if (t == CancellationManager::kInvalidToken) fire->Fire(absl::CancelledError("already cancelled"));
  }
  // Passes (or fails) every value held now.
  void Release(const absl::Status& s = absl::OkStatus()) {
    std::vector<std::shared_ptr<Held>> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (auto& h : held) h->Fire(s);
  }
  // Values held and not released or cancelled.
  int waiting() {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (auto& h : held_) n += h->fired.load() ? 0 : 1;
    return n;
  }

 private:
  struct Held {
    std::atomic<bool> fired{false};
    OpKernelContext* ctx = nullptr;
    AsyncOpKernel::DoneCallback done;
    void Fire(const absl::Status& s) {
      if (fired.exchange(true)) return;
      if (s.ok()) (void)ctx->set_output(0, ctx->input(0));
      AsyncOpKernel::DoneCallback d = std::move(done);
      d(s);
    }
  };
  absl::Mutex mu_;
  std::vector<std::shared_ptr<Held>> held_ ABSL_GUARDED_BY(mu_);
};

class GateOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override { Gate::Get().Hold(ctx, std::move(done)); }
};

class DeferredUpdatesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static bool once = [] {
      OpRegistry::Global()->MustRegister(
          OpDefBuilder("TestGate").Input("x: float").Output("y: float").SetShapeFn(UnchangedShape));
      KernelRegistry::Global()->Register<GateOp>("TestGate", kCpu, DT_INVALID);
      return true;
    }();
    (void)once;
  }

  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto servers = StartLocalCluster(*spec);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (auto& s : servers_) {
      if (s->task_name() == "/job:worker/replica:0/task:0") target_ = s->target();
      if (s->task_name() == "/job:ps/replica:0/task:0") ps_ = s.get();
    }
    ASSERT_FALSE(target_.empty());
    ASSERT_NE(ps_, nullptr);

    auto ps = root_.WithDevice("/job:ps/task:0");
    auto worker = root_.WithDevice("/job:worker/task:0");
    v_ = ops::MakeVariable(ps.WithOpName("v"), ops::Const(ps, 0.0f));
    seen_ = ops::Identity(worker.WithOpName("seen"), v_);
    Output grad = ops::Add(worker, ops::Mul(worker, seen_, ops::Const(worker, 0.0f)), ops::Const(worker, 1.0f));
    Output gated(ops::Raw(ps.WithOpName("gate"), "TestGate", {grad}), 0, ps);
    train_ = ops::AssignAdd(ps.WithOpName("train"), v_, gated).op();
    deferring_ = DeferVariableUpdates(worker, train_);
    init_ = ops::GlobalVariablesInitializer(root_);
    ASSERT_TRUE(root_.ok()) << root_.status();
  }

  void TearDown() override { Gate::Get().Release(absl::CancelledError("the test is over")); }

  SessionOptions Options() {
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    return o;
  }
  const DeferredUpdates& PsDeferred() { return ps_->impl()->worker()->deferred_updates(); }

  // One step of `target`, bounded (a step that waited for a closed gate
  // would end with DeadlineExceeded rather than hang).
  absl::Status Step(Session& sess, const Operation& target) {
    RunOptions ro;
    ro.timeout_ms = 120000;
    return sess.Run({}, {seen_}, {target}, ro).status();
  }
  float ReadV(Session& sess) {
    auto v = sess.Run({v_});
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? (*v)[0].scalar<float>() : -1;
  }

  std::vector<std::unique_ptr<Server>> servers_;
  Server* ps_ = nullptr;
  std::string target_;
  Scope root_ = Scope::NewRootScope();
  Output v_, seen_;
  Operation train_, deferring_, init_;
};

TEST_F(DeferredUpdatesTest, AStepEndsBeforeItsUpdateRunsAndTheNextPlainStepSeesIt) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  const double before = DeferredUpdates::DeferredTotal();
  ASSERT_TRUE(Step(sess, deferring_).ok()) << "the step ended with its update held at the closed gate";
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  EXPECT_EQ(PsDeferred().in_flight(), 1);
  EXPECT_EQ(DeferredUpdates::DeferredTotal() - before, 1);
  Gate::Get().Release();
  // A step of another signature starts on the ps after the session's update.
  EXPECT_EQ(ReadV(sess), 1.0f);
  EXPECT_EQ(PsDeferred().in_flight(), 0);
}

// MonitoredSession reads the global step after every step: for a deferring
// step that read does not wait for the step's updates.
TEST_F(DeferredUpdatesTest, AMonitoredSessionsDeferringStepEndsBeforeItsUpdates) {
  auto ps = root_.WithDevice("/job:ps/task:0");
  Output global_step = CreateGlobalStep(ps);
  Operation increment =
      ops::AssignAdd(ps.WithControlDependencies({train_}), global_step, ops::Const(ps, int64_t{1})).op();
  Operation step = DeferVariableUpdates(root_.WithDevice("/job:worker/task:0"), increment);
  ASSERT_TRUE(root_.ok()) << root_.status();
  SupervisorOptions sv;
  sv.is_chief = true;
  sv.global_step = global_step;
  sv.session_options = Options();
  auto sess = MonitoredSession::Create(root_, target_, sv);
  ASSERT_TRUE(sess.ok()) << sess.status();
  RunOptions ro;
  ro.timeout_ms = 120000;
  auto out = (*sess)->Run({}, {seen_}, {step}, ro);
  ASSERT_TRUE(out.ok()) << out.status() << " (the step ended with its update held at the closed gate)";
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  EXPECT_EQ((*sess)->global_step(), 0) << "read as the step started on the ps";
  Gate::Get().Release();
  EXPECT_TRUE((*sess)->Close().ok());
}

TEST_F(DeferredUpdatesTest, WithoutTheMarkerAStepWaitsForItsUpdate) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  std::atomic<bool> returned{false};
  absl::Status result;
  std::thread step([&] {
    result = Step(sess, train_);
    returned = true;
  });
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  EXPECT_FALSE(returned.load()) << "the step's answer needs its update, held at the gate";
  Gate::Get().Release();
  step.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(ReadV(sess), 1.0f);
}

TEST_F(DeferredUpdatesTest, ASessionHasAtMostOneStepsUpdatesInFlight) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  ASSERT_TRUE(Step(sess, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  std::atomic<bool> returned{false};
  absl::Status result;
  std::thread second([&] {
    result = Step(sess, deferring_);
    returned = true;
  });
  // The second step's outputs are out (its update waits at the gate too),
  // but its answer waits for the first step's update.
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 2; }, absl::Seconds(60)));
  EXPECT_FALSE(returned.load()) << "step 2 answered while step 1's update was in flight";
  EXPECT_EQ(PsDeferred().in_flight(), 1);
  Gate::Get().Release();
  second.join();
  EXPECT_TRUE(result.ok()) << result;
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 0; }, absl::Seconds(60)));
  Gate::Get().Release();
  EXPECT_EQ(ReadV(sess), 2.0f);
}

TEST_F(DeferredUpdatesTest, AFailedDeferredUpdateFailsTheSessionsNextStep) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  const double failed = DeferredUpdates::FailedTotal();
  ASSERT_TRUE(Step(sess, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  Gate::Get().Release(absl::InternalError("injected failure of the update"));
  ASSERT_TRUE(WaitUntil([&] { return DeferredUpdates::FailedTotal() > failed; }, absl::Seconds(60)));
  absl::Status next = Step(sess, deferring_);
  ASSERT_FALSE(next.ok()) << "the failure of step 1's update is reported";
  EXPECT_NE(next.message().find("injected failure of the update"), std::string::npos) << next;
  EXPECT_NE(next.message().find("deferred"), std::string::npos) << next;
  // Reported once: the session goes on.
  ASSERT_TRUE(Step(sess, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  Gate::Get().Release();
  EXPECT_EQ(ReadV(sess), 1.0f) << "the failed update added nothing; the last one did";
}

TEST_F(DeferredUpdatesTest, ClosingTheSessionWaitsForItsDeferredUpdates) {
  auto sess = std::make_unique<Session>(target_, Options());
  ASSERT_TRUE(sess->Run({}, {}, {init_}).ok());
  const double failed = DeferredUpdates::FailedTotal();
  ASSERT_TRUE(Step(*sess, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  std::atomic<bool> closed{false};
  std::thread close([&] {
    EXPECT_TRUE(sess->Close().ok());
    closed = true;
  });
  // Closing deregisters the session's partitions; the ps waits there.
  ASSERT_TRUE(WaitUntil([&] { return closed.load() || PsDeferred().blocked_waiters() > 0; }, absl::Seconds(60)));
  EXPECT_FALSE(closed.load()) << "the session closed while its update was in flight";
  Gate::Get().Release();
  close.join();
  EXPECT_EQ(DeferredUpdates::FailedTotal(), failed) << "the update ended, not cancelled";
  Session other(target_, Options());
  EXPECT_EQ(ReadV(other), 1.0f);
}

TEST_F(DeferredUpdatesTest, ACheckpointWaitsForEverySessionsDeferredUpdates) {
  auto saver = Saver::Create(root_);
  ASSERT_TRUE(saver.ok()) << saver.status();
  Session training(target_, Options()), saving(target_, Options());
  ASSERT_TRUE(training.Run({}, {}, {init_}).ok());
  ASSERT_TRUE(Step(training, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  const std::string dir = ::testing::TempDir() + "/deferred_updates_ckpt";
  std::atomic<bool> saved{false};
  absl::StatusOr<std::string> path;
  std::thread save([&] {
    path = (*saver)->Save(&saving, dir, 1);
    saved = true;
  });
  // The save's partition on the ps waits for the other session's update.
  ASSERT_TRUE(WaitUntil([&] { return saved.load() || PsDeferred().queued_runs() > 0; }, absl::Seconds(60)));
  EXPECT_FALSE(saved.load()) << "the checkpoint was written while an update was in flight";
  Gate::Get().Release();
  save.join();
  ASSERT_TRUE(path.ok()) << path.status();
  // The checkpoint holds the update: restore it over a changed v.
  ASSERT_TRUE(
      saving.Run({}, {}, {ops::Assign(root_.WithDevice("/job:ps/task:0"), v_, ops::Const(root_, 7.0f)).op()}).ok());
  ASSERT_TRUE((*saver)->Restore(&saving, *path).ok());
  EXPECT_EQ(ReadV(saving), 1.0f);
}

TEST_F(DeferredUpdatesTest, StoppingThePsWaitsForDeferredUpdates) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  const double failed = DeferredUpdates::FailedTotal();
  ASSERT_TRUE(Step(sess, deferring_).ok());
  ASSERT_TRUE(WaitUntil([] { return Gate::Get().waiting() == 1; }, absl::Seconds(60)));
  std::atomic<bool> stopped{false};
  std::thread stop([&] {
    ps_->Stop();
    stopped = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return stopped.load() || PsDeferred().blocked_waiters() > 0; }, absl::Seconds(60)));
  EXPECT_FALSE(stopped.load()) << "the ps stopped with an update in flight";
  Gate::Get().Release();
  stop.join();
  EXPECT_EQ(DeferredUpdates::FailedTotal(), failed) << "the update ended, not cancelled";
}

}  // namespace
}  // namespace distflow

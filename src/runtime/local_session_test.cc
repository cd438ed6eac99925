#include "runtime/local_session.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/fake_clock_env.h"
#include "base/timer.h"
#include "base/wait_until.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_test_util.h"
#include "runtime/graph_def_builder_for_test.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;
using test::AddVariable;

TEST(LocalSession, VariablesPersistAcrossRuns) {
  proto::GraphDef g;
  AddVariable(&g, "counter", PartialShape({}), DT_INT64);
  AddConst(&g, "zero", Tensor::Scalar<int64_t>(0));
  AddConst(&g, "one", Tensor::Scalar<int64_t>(1));
  AddNode(&g, "init", "Assign", {"counter", "zero"});
  AddNode(&g, "incr", "AssignAdd", {"counter", "one"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  ASSERT_TRUE(s.Run({}, {}, {"init"}).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.Run({}, {}, {"incr"}).ok());
  auto out = s.Run({}, {"counter"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 5);
  EXPECT_EQ(s.num_cached_executors(), 3) << "one executor per signature, reused";
}

TEST(LocalSession, UninitializedVariableNamesIt) {
  proto::GraphDef g;
  AddVariable(&g, "weights_1", PartialShape({2}), DT_FLOAT);
  AddNode(&g, "read", "Identity", {"weights_1"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto out = s.Run({}, {"read"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(out.status().message().find("uninitialized variable 'weights_1'"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("Node 'read' (Identity)"), std::string::npos) << out.status();
}

TEST(LocalSession, SharedContainerOutlivesTheSession) {
  proto::GraphDef g;
  AddVariable(&g, "shared_w", PartialShape({}), DT_FLOAT, "experiment");
  AddConst(&g, "v", Tensor::Scalar<float>(42));
  AddNode(&g, "init", "Assign", {"shared_w", "v"});
  {
    LocalSession s1;
    ASSERT_TRUE(s1.Create(g).ok());
    ASSERT_TRUE(s1.Run({}, {}, {"init"}).ok());
  }
  LocalSession s2;
  ASSERT_TRUE(s2.Create(g).ok());
  auto out = s2.Run({}, {"shared_w"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 42.f);
  ResetContainers(s2.device(), {"experiment"});
  LocalSession s3;
  ASSERT_TRUE(s3.Create(g).ok());
  EXPECT_FALSE(s3.Run({}, {"shared_w"}).ok()) << "Reset clears the container";
}

TEST(LocalSession, PrivateVariablesDieWithTheSession) {
  proto::GraphDef g;
  AddVariable(&g, "w", PartialShape({}), DT_FLOAT);
  AddConst(&g, "v", Tensor::Scalar<float>(1));
  AddNode(&g, "init", "Assign", {"w", "v"});
  LocalSession s1;
  ASSERT_TRUE(s1.Create(g).ok());
  ASSERT_TRUE(s1.Run({}, {}, {"init"}).ok());
  LocalSession s2;
  ASSERT_TRUE(s2.Create(g).ok());
  EXPECT_FALSE(s2.Run({}, {"w"}).ok()) << "another session has its own default container";
  size_t before = LocalCpuDevice()->resource_manager()->NumVars();
  ASSERT_TRUE(s1.Close().ok());
  EXPECT_LT(LocalCpuDevice()->resource_manager()->NumVars(), before);
  EXPECT_FALSE(s1.Run({}, {"w"}).ok());
}

TEST(LocalSession, FeedShapeAndDtypeAreChecked) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({-1, 784}));
  AddNode(&g, "y", "Identity", {"x"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto bad_shape = s.Run({{"x", Tensor(DT_FLOAT, TensorShape({50, 783}))}}, {"y"});
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("shape [50,783] for tensor 'x:0', which has shape [?,784]"),
            std::string::npos)
      << bad_shape.status();
  auto bad_type = s.Run({{"x", Tensor(DT_INT32, TensorShape({1, 784}))}}, {"y"});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("int32"), std::string::npos);
  auto good = s.Run({{"x:0", Tensor(DT_FLOAT, TensorShape({2, 784}))}}, {"y:0"});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)[0].shape(), TensorShape({2, 784}));
}

TEST(LocalSession, FeedingANonPlaceholderReplacesIt) {
  proto::GraphDef g;
  AddConst(&g, "c", Tensor::Scalar<float>(1));
  AddNode(&g, "y", "Identity", {"c"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto out = s.Run({{"c", Tensor::Scalar<float>(7)}}, {"y"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 7.f);
}

TEST(LocalSession, ConcurrentRunsOnOneSession) {
  proto::GraphDef g;
  AddVariable(&g, "total", PartialShape({}), DT_INT64, "");
  AddConst(&g, "zero", Tensor::Scalar<int64_t>(0));
  AddConst(&g, "one", Tensor::Scalar<int64_t>(1));
  AddNode(&g, "init", "Assign", {"total", "zero"});
  AddNode(&g, "incr", "AssignAdd", {"total", "one"});
  test::AddPlaceholder(&g, "x", DT_INT32, PartialShape({}));
  AddNode(&g, "echo", "Identity", {"x"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  ASSERT_TRUE(s.Run({}, {}, {"init"}).ok());
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto inc = s.Run({}, {}, {"incr"});
        auto e = s.Run({{"x", Tensor::Scalar<int32_t>(t * 1000 + i)}}, {"echo"});
        if (!inc.ok() || !e.ok() || (*e)[0].scalar<int32_t>() != t * 1000 + i) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  auto total = s.Run({}, {"total"});
  ASSERT_TRUE(total.ok());
  EXPECT_EQ((*total)[0].scalar<int64_t>(), 800) << "AssignAdd holds the variable's lock";
}

// A test-only op that blocks until its step is cancelled.
class BlockUntilCancelledOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    auto shared_done = std::make_shared<DoneCallback>(std::move(done));
    CancellationManager::Token t = ctx->cancellation_manager()->Register(
        [shared_done] { (*shared_done)(absl::CancelledError("blocked op cancelled")); });
    if (t == CancellationManager::kInvalidToken) (*shared_done)(absl::CancelledError("already cancelled"));
  }
};

class LocalSessionTimeout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static bool once = [] {
      OpRegistry::Global()->MustRegister(OpDefBuilder("TestBlockUntilCancelled").Output("out: float").SetIsStateful());
      KernelRegistry::Global()->Register<BlockUntilCancelledOp>("TestBlockUntilCancelled", kCpu, DT_INVALID);
      return true;
    }();
    (void)once;
  }
};

// Deadlines run on a timer with a fake clock: a test advances the clock past
// a minute-long deadline instead of waiting for a short one, so the step is
// certainly still running when the clock moves, on any machine.
class FakeClockDeadline {
 public:
  FakeClockDeadline() : timer_(&clock_) {}
  Timer* timer() { return &timer_; }
  // Waits (bounded) until a step's deadline is on the timer.
  bool DeadlineScheduled() {
    WaitUntil([&] { return timer_.NumPendingForTest() > 0; }, absl::Seconds(60), absl::Milliseconds(1));
    return timer_.NumPendingForTest() == 1;
  }
  void Advance(absl::Duration d) {
    clock_.Advance(d);
    timer_.Poke();
  }

 private:
  FakeClockEnv clock_;
  Timer timer_;
};

TEST_F(LocalSessionTimeout, DeadlineCancelsTheStep) {
  proto::GraphDef g;
  AddNode(&g, "block", "TestBlockUntilCancelled");
  AddNode(&g, "after", "Identity", {"block"});
  FakeClockDeadline clock;
  LocalSession s({}, clock.timer());
  ASSERT_TRUE(s.Create(g).ok());
  RunOptions ro;
  ro.timeout_ms = 60000;
  absl::StatusOr<std::vector<Tensor>> out;
  absl::Notification done;
  std::thread run([&] {
    out = s.Run(ro, {}, {"after"}, {});
    done.Notify();
  });
  ASSERT_TRUE(clock.DeadlineScheduled());
  clock.Advance(absl::Seconds(59));
  EXPECT_FALSE(done.HasBeenNotified()) << "the step ended before its deadline";
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  run.join();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_NE(out.status().message().find("timed out after 60000 ms"), std::string::npos) << out.status();
  // The session still works afterwards.
  proto::GraphDef more;
  AddConst(&more, "c", Tensor::Scalar<float>(3));
  ASSERT_TRUE(s.Extend(more).ok());
  auto ok = s.Run({}, {"c"});
  ASSERT_TRUE(ok.ok()) << ok.status();
}

TEST_F(LocalSessionTimeout, SessionOptionTimeoutApplies) {
  proto::GraphDef g;
  AddNode(&g, "block", "TestBlockUntilCancelled");
  SessionOptions so;
  so.operation_timeout_ms = 30000;
  FakeClockDeadline clock;
  LocalSession s(so, clock.timer());
  ASSERT_TRUE(s.Create(g).ok());
  absl::StatusOr<std::vector<Tensor>> out;
  std::thread run([&] { out = s.Run({}, {"block"}); });
  ASSERT_TRUE(clock.DeadlineScheduled());
  clock.Advance(absl::Seconds(31));
  run.join();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_NE(out.status().message().find("timed out after 30000 ms"), std::string::npos) << out.status();
}

TEST_F(LocalSessionTimeout, RunAsyncDeadlineFiresWithoutAParkedThread) {
  proto::GraphDef g;
  AddNode(&g, "block", "TestBlockUntilCancelled");
  FakeClockDeadline clock;
  LocalSession s({}, clock.timer());
  ASSERT_TRUE(s.Create(g).ok());
  RunOptions ro;
  ro.timeout_ms = 60000;
  absl::Notification done;
  absl::Status status;
  s.RunAsync(ro, {}, {"block"}, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    status = r.status();
    done.Notify();
  });
  // RunAsync returned on this thread with the step still waiting: nothing
  // but the timer can end it now.
  EXPECT_FALSE(done.HasBeenNotified()) << "RunAsync returned only after the step ended";
  ASSERT_TRUE(clock.DeadlineScheduled());
  clock.Advance(absl::Seconds(61));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST(LocalSession, RunAsyncRunsATinyStepOnTheCallingThread) {
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(2));
  AddConst(&g, "b", Tensor::Scalar<float>(3));
  AddNode(&g, "sum", "Add", {"a", "b"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  std::thread::id ran_on;
  absl::StatusOr<std::vector<Tensor>> out;
  s.RunAsync({}, {}, {"sum"}, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    ran_on = std::this_thread::get_id();
    out = std::move(r);
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id()) << "a scalar Add should not hop threads";
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(5), (*out)[0]);
}

TEST(LocalSession, RunAsyncCallsDoneOnceWhenDeadlinesRaceCompletion) {
  // Deadlines of 1 ms race steps that take about as long; every step must
  // report exactly once, either its result or DeadlineExceeded.
  Tensor m = Tensor::Allocate(DT_FLOAT, TensorShape({96, 96})).value();
  for (float& v : m.flat<float>()) v = 0.5f;
  proto::GraphDef g;
  AddConst(&g, "m", m);
  AddNode(&g, "mm", "MatMul", {"m", "m"});
  AddNode(&g, "mm2", "MatMul", {"mm", "m"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  constexpr int kSteps = 300;
  std::atomic<int> calls{0}, ok{0}, deadline{0};
  absl::BlockingCounter all(kSteps);
  for (int i = 0; i < kSteps; ++i) {
    RunOptions ro;
    ro.timeout_ms = 1;
    s.RunAsync(ro, {}, {"mm2"}, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
      calls.fetch_add(1);
      if (r.ok()) ok.fetch_add(1);
      if (r.status().code() == absl::StatusCode::kDeadlineExceeded) deadline.fetch_add(1);
      all.DecrementCount();
    });
  }
  all.Wait();
  EXPECT_EQ(calls.load(), kSteps);
  EXPECT_EQ(ok.load() + deadline.load(), kSteps);
}

// A test-only expensive op: forwards its input after 50 ms and records the
// thread it ran on.
std::atomic<std::thread::id> slow_op_thread;
class SlowRecordThreadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    slow_op_thread.store(std::this_thread::get_id());
    absl::SleepFor(absl::Milliseconds(50));
    return ctx->set_output(0, ctx->input(0));
  }
};

class LocalSessionAsync : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    static bool once = [] {
      OpRegistry::Global()->MustRegister(
          OpDefBuilder("TestSlowRecordThread").Input("x: float").Output("y: float").SetIsStateful());
      KernelRegistry::Global()->Register<SlowRecordThreadOp>("TestSlowRecordThread", kCpu, DT_INVALID);
      return true;
    }();
    (void)once;
  }
  static proto::GraphDef Graph(int64_t n) {
    Tensor m = Tensor::Allocate(DT_FLOAT, TensorShape({n})).value();
    for (float& v : m.flat<float>()) v = 1.0f;
    proto::GraphDef g;
    AddConst(&g, "m", m);
    AddNode(&g, "slow", "TestSlowRecordThread", {"m"});
    return g;
  }
};

TEST_F(LocalSessionAsync, LargeInputsGoToThePoolAndRunAsyncReturnsAtOnce) {
  LocalSession s;
  ASSERT_TRUE(s.Create(Graph(1 << 18)).ok());  // estimated work over the executor's inline limit
  absl::Notification done;
  std::thread::id done_on;
  absl::StatusOr<std::vector<Tensor>> out;
  s.RunAsync({}, {}, {"slow"}, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    done_on = std::this_thread::get_id();
    out = std::move(r);
    done.Notify();
  });
  EXPECT_FALSE(done.HasBeenNotified()) << "RunAsync waited for a 50 ms kernel";
  done.WaitForNotification();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(slow_op_thread.load(), std::this_thread::get_id());
  EXPECT_NE(done_on, std::this_thread::get_id());
}

TEST_F(LocalSessionAsync, TinyInputsRunOnTheCallingThread) {
  LocalSession s;
  ASSERT_TRUE(s.Create(Graph(16)).ok());
  absl::StatusOr<std::vector<Tensor>> out;
  s.RunAsync({}, {}, {"slow"}, {}, [&](absl::StatusOr<std::vector<Tensor>> r) { out = std::move(r); });
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(slow_op_thread.load(), std::this_thread::get_id());
}

TEST_F(LocalSessionAsync, LastReferenceMayBeDroppedOnItsOwnPoolThread) {
  // The distributed worker keeps a partition's session alive from the step's
  // callback; if the graph is deregistered meanwhile, the session dies on the
  // thread that ran its last node.
  for (int i = 0; i < 5; ++i) {
    auto session = std::make_shared<LocalSession>();
    ASSERT_TRUE(session->Create(Graph(1 << 18)).ok());  // runs on the pool
    LocalSession* raw = session.get();
    absl::Notification done;
    std::thread::id ran_on;
    raw->RunAsync({}, {}, {"slow"}, {}, [&, keep = std::move(session)](absl::StatusOr<std::vector<Tensor>> r) mutable {
      EXPECT_TRUE(r.ok()) << r.status();
      ran_on = std::this_thread::get_id();
      keep.reset();  // the last reference, on a pool thread
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_NE(ran_on, std::this_thread::get_id());
  }
}

TEST(LocalSession, BadExtendLeavesGraphUnchanged) {
  proto::GraphDef g;
  AddConst(&g, "c", Tensor::Scalar<float>(1));
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  proto::GraphDef bad;
  AddNode(&bad, "ok_node", "Identity", {"c"});
  AddNode(&bad, "bad_node", "Identity", {"nope"});
  EXPECT_FALSE(s.Extend(bad).ok());
  EXPECT_FALSE(s.Run({}, {"ok_node"}).ok()) << "nothing of a failed Extend is kept";
}

}  // namespace
}  // namespace distflow

#include "runtime/executor.h"

#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/fake_clock_env.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "gtest/gtest.h"
#include "kernels/op_test_util.h"
#include "kernels/rendezvous.h"
#include "runtime/graph_def_builder_for_test.h"
#include "runtime/kernel_threads.h"
#include "runtime/local_session.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;

TEST(Executor, RunsOnlyWhatTheFetchNeeds) {
  proto::GraphDef g;
  AddConst(&g, "a", Tensor::Scalar<float>(1));
  AddNode(&g, "ida", "Identity", {"a"});
  test::AddPlaceholder(&g, "unfed", DT_FLOAT, PartialShape({}));
  AddNode(&g, "idu", "Identity", {"unfed"});
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {}, {{"ida", 0}}, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ((*ex)->num_nodes(), 2) << "the unfed placeholder branch is pruned";
  auto out = (*ex)->Run({}, {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(1), (*out)[0]);
}

TEST(Executor, FeedCutsTheGraph) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_INT32, PartialShape({-1}));
  AddNode(&g, "y", "Identity", {"x"});
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok());
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {{"x", 0}}, {{"y", 0}, {"x", 0}}, {});
  ASSERT_TRUE(ex.ok()) << ex.status();
  Tensor v = Tensor::FromVector<int32_t>({4, 5});
  auto out = (*ex)->Run({}, {v});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TENSOR_EQ(v, (*out)[0]);
  EXPECT_TENSOR_EQ(v, (*out)[1]);
}

TEST(Executor, AControlEdgeFromAFedPlaceholderIsSatisfiedByTheFeed) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "grad", DT_FLOAT, PartialShape({}));
  test::AddVariable(&g, "v", PartialShape({}), DT_FLOAT);
  AddConst(&g, "one", Tensor::Scalar<float>(1));
  AddNode(&g, "update", "Assign", {"v", "one", "^grad"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto out = s.Run({{"grad", Tensor::Scalar<float>(3)}}, {"update"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 1.0f);
  // Unfed, the placeholder runs and fails naming itself.
  out = s.Run({}, {"update"});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("You must feed a value for placeholder 'grad'"), std::string::npos)
      << out.status();
}

TEST(Executor, MissingFetchSuggestsNames) {
  proto::GraphDef g;
  AddConst(&g, "weights_1", Tensor::Scalar<float>(1));
  auto graph = Graph::FromGraphDef(g);
  KernelCache kernels;
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  auto ex = Executor::Create(**graph, eo, &kernels, {}, {{"weight_1", 0}}, {});
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ex.status().message().find("did you mean weights_1"), std::string::npos) << ex.status();
}

TEST(Executor, ControlDependenciesOrderSideEffects) {
  // v = 1; then (after the assign, via a control edge) v += 10; fetch v.
  proto::GraphDef g;
  test::AddVariable(&g, "v", PartialShape({}), DT_INT32);
  AddConst(&g, "one", Tensor::Scalar<int32_t>(1));
  AddConst(&g, "ten", Tensor::Scalar<int32_t>(10));
  AddNode(&g, "init", "Assign", {"v", "one"});
  AddNode(&g, "add", "AssignAdd", {"v", "ten", "^init"});
  LocalSession s;
  ASSERT_TRUE(s.Create(g).ok());
  auto out = s.Run({}, {"add"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 11);
}

// A rendezvous whose receives wait until a test sends; cancelling the step
// ends a waiting receive with its reason.
class TestRendezvous : public Rendezvous {
 public:
  absl::Status Send(int64_t step_id, const std::string& key, const Tensor& value) override {
    DoneCallback done;
    {
      absl::MutexLock lock(&mu_);
      auto it = waiting_.find({step_id, key});
      if (it == waiting_.end()) {
        sent_[{step_id, key}] = value;
        return absl::OkStatus();
      }
      done = std::move(it->second);
      waiting_.erase(it);
    }
    done(absl::OkStatus(), value);
    return absl::OkStatus();
  }
  void RecvAsync(int64_t step_id, const std::string& key, const std::string&, CancellationManager* cm,
                 DoneCallback done) override {
    Tensor t;
    bool there = false;
    {
      absl::MutexLock lock(&mu_);
      auto sent = sent_.find({step_id, key});
      there = sent != sent_.end();
      if (there) {
        t = sent->second;
        sent_.erase(sent);
      } else {
        waiting_[{step_id, key}] = std::move(done);
        ++receives_waiting_;
      }
    }
    if (there) {
      done(absl::OkStatus(), t);
      return;
    }
    if (cm == nullptr) return;
    auto cancel = [this, cm, step_id, key] {
      DoneCallback d;
      {
        absl::MutexLock lock(&mu_);
        auto it = waiting_.find({step_id, key});
        if (it == waiting_.end()) return;
        d = std::move(it->second);
        waiting_.erase(it);
      }
      d(cm->reason(), Tensor());
    };
    if (cm->Register(cancel) == CancellationManager::kInvalidToken) cancel();
  }
  int receives_waiting() {
    absl::MutexLock lock(&mu_);
    return receives_waiting_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::pair<int64_t, std::string>, DoneCallback> waiting_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, std::string>, Tensor> sent_ ABSL_GUARDED_BY(mu_);
  int receives_waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

proto::NodeDef* AddRecv(proto::GraphDef* g, const std::string& name, const std::string& key) {
  proto::NodeDef* n = AddNode(g, name, "_Recv");
  SetAttrType(n, "tensor_type", DT_FLOAT);
  SetAttrString(n, "key", key);
  SetAttrString(n, "send_task", "/job:ps/replica:0/task:0");
  SetAttrShape(n, "shape", PartialShape({}));
  return n;
}

struct Built {
  std::unique_ptr<Graph> graph;
  KernelCache kernels;
  std::unique_ptr<Executor> executor;
};

// Builds `g` into an executor on the local CPU with `pool` as its inter-op pool.
void Build(const proto::GraphDef& g, ThreadPool* pool, Rendezvous* rendezvous, const std::vector<TensorId>& feeds,
           const std::vector<TensorId>& fetches, const std::vector<std::string>& targets, Built* out,
           Timer* timer = nullptr) {
  auto graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  out->graph = std::move(*graph);
  ExecutorOptions eo;
  eo.device = LocalCpuDevice();
  eo.inter_op_pool = pool;
  eo.rendezvous = rendezvous;
  eo.timer = timer;
  auto ex = Executor::Create(*out->graph, eo, &out->kernels, feeds, fetches, targets);
  ASSERT_TRUE(ex.ok()) << ex.status();
  out->executor = std::move(*ex);
}

TEST(Executor, AFailingNodeEndsTheStepNamingItAndTheNextStepRuns) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({-1}));
  AddConst(&g, "five", Tensor::FromVector<int32_t>({5}));
  AddNode(&g, "bad_reshape", "Reshape", {"x", "five"});
  AddConst(&g, "c", Tensor::Scalar<float>(3));
  AddNode(&g, "fine", "Neg", {"c"});
  ThreadPool pool("executor_test", 2);
  Built b;
  Build(g, &pool, nullptr, {{"x", 0}}, {{"bad_reshape", 0}, {"fine", 0}}, {}, &b);
  auto out = b.executor->Run({}, {Tensor::FromVector<float>({1, 2, 3, 4})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Node 'bad_reshape' (Reshape): "), std::string::npos) << out.status();
  // The same executor runs the next step: a failed step leaves nothing behind.
  auto ok = b.executor->Run({}, {Tensor::FromVector<float>({1, 2, 3, 4, 5})});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(-3), (*ok)[1]);
}

// A step of "out = -recv" run asynchronously; Start returns once its
// receive waits in the rendezvous (the condition itself, not a time that is
// "long enough").
class WaitingReceive {
 public:
  WaitingReceive() : pool_("executor_test", 2) {}

  void Start(int64_t step_id, CancellationManager* cm, int64_t timeout_ms = 0, Timer* timer = nullptr) {
    proto::GraphDef g;
    AddRecv(&g, "recv", "edge_1");
    AddNode(&g, "out", "Neg", {"recv"});
    Build(g, &pool_, &rendezvous_, {}, {{"out", 0}}, {}, &built_, timer);
    ASSERT_NE(built_.executor, nullptr);
    StepOptions so;
    so.step_id = step_id;
    so.cancellation = cm;
    so.timeout_ms = timeout_ms;
    built_.executor->RunAsync(so, {}, [this](absl::StatusOr<std::vector<Tensor>> r) {
      result_ = std::move(r);
      finished_.Notify();
    });
    while (rendezvous_.receives_waiting() == 0) std::this_thread::yield();
  }
  TestRendezvous& rendezvous() { return rendezvous_; }
  bool finished() const { return finished_.HasBeenNotified(); }
  const absl::StatusOr<std::vector<Tensor>>& Wait() {
    finished_.WaitForNotification();
    return result_;
  }

 private:
  ThreadPool pool_;
  TestRendezvous rendezvous_;
  Built built_;
  absl::Notification finished_;
  absl::StatusOr<std::vector<Tensor>> result_;
};

TEST(Executor, CancellingAStepEndsItsWaitingReceiveWithTheReason) {
  CancellationManager cm;
  WaitingReceive step;
  ASSERT_NO_FATAL_FAILURE(step.Start(7, &cm));
  EXPECT_FALSE(step.finished());
  cm.StartCancel(absl::AbortedError("the ps task was declared dead"));
  const auto& result = step.Wait();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted) << result.status();
  EXPECT_NE(result.status().message().find("the ps task was declared dead"), std::string::npos) << result.status();
}

TEST(Executor, AReceiveCompletesWhenItsTensorIsSentAfterTheStepStarted) {
  WaitingReceive step;
  ASSERT_NO_FATAL_FAILURE(step.Start(3, nullptr));
  ASSERT_TRUE(step.rendezvous().Send(3, "edge_1", Tensor::Scalar<float>(2)).ok());
  const auto& result = step.Wait();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(-2), (*result)[0]);
}

// "out = recv x recv" (a 256 x 256 MatMul: an expensive kernel, too much
// work to inline anywhere), its inter-op pool held busy: when the receive
// completes on a thread marked by ScopedLongKernelsAllowed (the bulk
// pool's), the MatMul runs right there, so the step has ended when the
// send returns; on an unmarked thread (gRPC's) it waits for the pool.
void SendAndSeeWhetherTheStepEnded(bool marked, bool* ended_in_send) {
  proto::GraphDef g;
  SetAttrShape(AddRecv(&g, "recv", "edge_1"), "shape", PartialShape({256, 256}));
  AddNode(&g, "out", "MatMul", {"recv", "recv"});
  ThreadPool pool("executor_test", 2);
  absl::Notification release;
  for (int i = 0; i < pool.NumThreads(); ++i) pool.Schedule([&release] { release.WaitForNotification(); });
  TestRendezvous rendezvous;
  Built b;
  Build(g, &pool, &rendezvous, {}, {{"out", 0}}, {}, &b);
  ASSERT_NE(b.executor, nullptr);
  absl::Notification finished;
  absl::StatusOr<std::vector<Tensor>> result;
  StepOptions so;
  so.step_id = 1;
  b.executor->RunAsync(so, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    result = std::move(r);
    finished.Notify();
  });
  while (rendezvous.receives_waiting() == 0) std::this_thread::yield();
  std::thread send([&] {
    std::optional<ScopedLongKernelsAllowed> allowed;
    if (marked) allowed.emplace();
    ASSERT_TRUE(
        rendezvous
            .Send(1, "edge_1", Tensor::FromVector<float>(std::vector<float>(256 * 256, 1.0f), TensorShape({256, 256})))
            .ok());
    *ended_in_send = finished.HasBeenNotified();
  });
  send.join();
  release.Notify();
  finished.WaitForNotification();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)[0].flat<float>()[0], 256.0f);
}

TEST(Executor, AReceiveCompletedOnABulkThreadRunsItsExpensiveConsumerThere) {
  bool ended_in_send = false;
  ASSERT_NO_FATAL_FAILURE(SendAndSeeWhetherTheStepEnded(/*marked=*/true, &ended_in_send));
  EXPECT_TRUE(ended_in_send) << "the MatMul ran on the thread that completed the receive, not on the busy pool";
}

TEST(Executor, AReceiveCompletedOnAnRpcThreadHandsItsExpensiveConsumerToThePool) {
  bool ended_in_send = true;
  ASSERT_NO_FATAL_FAILURE(SendAndSeeWhetherTheStepEnded(/*marked=*/false, &ended_in_send));
  EXPECT_FALSE(ended_in_send) << "the MatMul waited for the inter-op pool";
}

TEST(Executor, ATargetOnlyNodeRunsAndControlEdgesOrderIt) {
  // Target "bump" (v += 5) runs after "set" (v = 1) through a control edge;
  // nothing is fetched. A second step without "set" adds again.
  proto::GraphDef g;
  test::AddVariable(&g, "v", PartialShape({}), DT_INT32, "executor_test_targets");
  AddConst(&g, "one", Tensor::Scalar<int32_t>(1));
  AddConst(&g, "five", Tensor::Scalar<int32_t>(5));
  AddNode(&g, "set", "Assign", {"v", "one"});
  AddNode(&g, "bump", "AssignAdd", {"v", "five", "^set"});
  AddNode(&g, "bump_only", "AssignAdd", {"v", "five"});
  AddNode(&g, "read", "Identity", {"v"});
  ThreadPool pool("executor_test", 2);
  Built first, second, read;
  Build(g, &pool, nullptr, {}, {}, {"bump"}, &first);
  Build(g, &pool, nullptr, {}, {}, {"bump_only"}, &second);
  Build(g, &pool, nullptr, {}, {{"read", 0}}, {}, &read);
  ASSERT_TRUE(first.executor->Run({}, {}).ok());
  ASSERT_TRUE(second.executor->Run({}, {}).ok());
  auto v = read.executor->Run({}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<int32_t>(), 11);
}

TEST(Executor, ConcurrentStepsOnOneExecutorKeepTheirOwnValues) {
  proto::GraphDef g;
  test::AddPlaceholder(&g, "x", DT_FLOAT, PartialShape({-1}));
  AddNode(&g, "sq", "Square", {"x"});
  ThreadPool pool("executor_test", 2);
  Built b;
  Build(g, &pool, nullptr, {{"x", 0}}, {{"sq", 0}}, {}, &b);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const float v = static_cast<float>(t * 1000 + i);
        auto out = b.executor->Run({}, {Tensor::FromVector<float>({v, 1})});
        if (!out.ok() || (*out)[0].flat<float>()[0] != v * v || (*out)[0].flat<float>()[1] != 1) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Executor, ADeadlineCancelsAStepThatWaitsForever) {
  // A minute's deadline on a fake clock: the test advances the clock instead
  // of waiting a minute.
  FakeClockEnv clock;
  Timer timer(&clock);
  WaitingReceive step;
  ASSERT_NO_FATAL_FAILURE(step.Start(11, nullptr, /*timeout_ms=*/60000, &timer));
  EXPECT_EQ(timer.NumPendingForTest(), 1u) << "the step's deadline is scheduled";
  EXPECT_FALSE(step.finished());
  clock.Advance(absl::Seconds(61));
  timer.Poke();
  const auto& out = step.Wait();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
  EXPECT_NE(out.status().message().find("Step 11 timed out after 60000 ms"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace distflow

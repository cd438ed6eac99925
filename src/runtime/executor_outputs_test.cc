// StepOptions::outputs_done: a step hands its outputs over as soon as the
// nodes whose results leave it have finished, while the rest (a ps's
// variable updates) still runs. The "rest" here is a 256 x 256 MatMul that
// only a thread of the inter-op pool may run, and the pool is held busy:
// whatever is reported before the pool is released cannot depend on it.
#include <vector>

#include "absl/synchronization/notification.h"
#include "base/thread_pool.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/graph_def_builder_for_test.h"
#include "runtime/local_session.h"
#include "tensor/tensor_testutil.h"

namespace distflow {
namespace {

using test::AddConst;
using test::AddNode;

struct HeldTail {
  proto::GraphDef g;
  std::unique_ptr<Graph> graph;
  KernelCache kernels;
  std::unique_ptr<Executor> executor;
  ThreadPool pool{"outputs_test", 2};
  absl::Notification release;

  // "y = Identity(x)" fetched; "tail = MatMul(big, big)" a target only.
  void Build(bool failing_fetch) {
    AddConst(&g, "x", Tensor::Scalar<float>(3));
    if (failing_fetch) {
      test::AddPlaceholder(&g, "unfed", DT_FLOAT, PartialShape({}));
      AddNode(&g, "y", "Identity", {"unfed"});
    } else {
      AddNode(&g, "y", "Identity", {"x"});
    }
    AddConst(&g, "big", Tensor::FromVector<float>(std::vector<float>(256 * 256, 1.0f), TensorShape({256, 256})));
    AddNode(&g, "tail", "MatMul", {"big", "big"});
    auto built = Graph::FromGraphDef(g);
    ASSERT_TRUE(built.ok()) << built.status();
    graph = std::move(*built);
    ExecutorOptions eo;
    eo.device = LocalCpuDevice();
    eo.inter_op_pool = &pool;
    auto ex = Executor::Create(*graph, eo, &kernels, {}, {{"y", 0}}, {"tail"});
    ASSERT_TRUE(ex.ok()) << ex.status();
    executor = std::move(*ex);
    for (int i = 0; i < pool.NumThreads(); ++i) pool.Schedule([this] { release.WaitForNotification(); });
  }
};

TEST(ExecutorOutputs, AreHandedOverBeforeTheNodesThatFeedNothingOutsideHaveRun) {
  HeldTail h;
  ASSERT_NO_FATAL_FAILURE(h.Build(/*failing_fetch=*/false));
  absl::Notification outputs, finished;
  std::vector<Tensor> early;
  absl::StatusOr<std::vector<Tensor>> result;
  StepOptions so;
  so.outputs_done = [&](std::vector<Tensor> out) {
    early = std::move(out);
    outputs.Notify();
  };
  h.executor->RunAsync(so, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    result = std::move(r);
    finished.Notify();
  });
  // The fetch ran on this thread; the MatMul waits for the held pool.
  ASSERT_TRUE(outputs.HasBeenNotified());
  EXPECT_FALSE(finished.HasBeenNotified()) << "the step cannot have ended: its MatMul waits for the pool";
  ASSERT_EQ(early.size(), 1u);
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(3), early[0]);
  h.release.Notify();
  finished.WaitForNotification();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TENSOR_EQ(Tensor::Scalar<float>(3), (*result)[0]);
}

TEST(ExecutorOutputs, WithoutTheCallbackTheStepReportsOnlyAtItsEnd) {
  HeldTail h;
  ASSERT_NO_FATAL_FAILURE(h.Build(/*failing_fetch=*/false));
  absl::Notification finished;
  h.executor->RunAsync({}, {}, [&](absl::StatusOr<std::vector<Tensor>>) { finished.Notify(); });
  EXPECT_FALSE(finished.HasBeenNotified());
  h.release.Notify();
  finished.WaitForNotification();
}

TEST(ExecutorOutputs, AreNotReportedWhenANodeFailedBefore) {
  HeldTail h;
  ASSERT_NO_FATAL_FAILURE(h.Build(/*failing_fetch=*/true));
  bool reported = false;
  absl::Notification finished;
  absl::StatusOr<std::vector<Tensor>> result;
  StepOptions so;
  so.outputs_done = [&](std::vector<Tensor>) { reported = true; };
  h.executor->RunAsync(so, {}, [&](absl::StatusOr<std::vector<Tensor>> r) {
    result = std::move(r);
    finished.Notify();
  });
  h.release.Notify();
  finished.WaitForNotification();
  EXPECT_FALSE(result.ok()) << "the unfed placeholder fails the step";
  EXPECT_FALSE(reported) << "a step that failed before its outputs were out hands nothing over";
}

}  // namespace
}  // namespace distflow

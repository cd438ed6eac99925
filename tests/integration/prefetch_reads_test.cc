// Prefetched variable reads (distflow/train/prefetch.h) on a cluster of real
// gRPC servers in this process, 1 ps + 1 worker, driven through a grpc://
// session on the worker as the book's program drives it.
//
// The model is a counter trained like a weight: v on the ps; the worker
// reads it ("seen", fetched) and computes from it an increment of 1 (the
// "gradient"), which the ps adds to v. Without prefetching, step k (from 1)
// sees exactly k - 1. With it, step k sees the value step k - 1 received:
// k - 2 or k - 1 (the ps's read in step k - 1 races with that step's own
// update, which no longer waits for it), never older.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/metrics.h"
#include "distflow/distflow.h"
#include "distflow/train/prefetch.h"
#include "gtest/gtest.h"
#include "worker/read_prefetcher.h"

namespace distflow {
namespace {

// RecvTensor calls this process's servers answered.
double RecvTensorCalls() {
  return Metrics::Global()
      ->GetCounter("distflow_rpc_server_handled_total", "",
                   {{"method", "/distflow.proto.WorkerService/RecvTensor"}, {"code", "OK"}})
      ->value();
}

class PrefetchReads : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = MakeLocalClusterSpec(1, 1);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto servers = StartLocalCluster(*spec);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = std::move(*servers);
    for (auto& s : servers_)
      if (s->task_name() == "/job:worker/replica:0/task:0") target_ = s->target();
    ASSERT_FALSE(target_.empty());

    auto ps = root_.WithDevice("/job:ps/task:0");
    auto worker = root_.WithDevice("/job:worker/task:0");
    v_ = ops::MakeVariable(ps.WithOpName("v"), ops::Const(ps, 0.0f));
    other_ = ops::MakeVariable(ps.WithOpName("other"), ops::Const(ps, 5.0f));
    seen_ = ops::Identity(worker.WithOpName("seen"), v_);
    // The read of a variable the step does not update is never prefetched.
    other_seen_ = ops::Identity(worker.WithOpName("other_seen"), other_);
    Output grad = ops::Add(worker, ops::Mul(worker, seen_, ops::Const(worker, 0.0f)), ops::Const(worker, 1.0f));
    train_ = ops::AssignAdd(ps.WithOpName("train"), v_, grad).op();
    prefetching_ = PrefetchVariableReads(worker, train_);
    init_ = ops::GlobalVariablesInitializer(root_);
    ASSERT_TRUE(root_.ok()) << root_.status();
  }

  SessionOptions Options() {
    SessionOptions o;
    o.wait_for_cluster_ms = 20000;
    return o;
  }

  // Runs one step of `target`; returns what the worker saw of v.
  float Step(Session& sess, const Operation& target) {
    auto out = sess.Run({}, {seen_, other_seen_}, {target});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return -1;
    EXPECT_EQ((*out)[1].scalar<float>(), 5.0f);
    return (*out)[0].scalar<float>();
  }

  std::vector<std::unique_ptr<Server>> servers_;
  std::string target_;
  Scope root_ = Scope::NewRootScope();
  Output v_, other_, seen_, other_seen_;
  Operation train_, prefetching_, init_;
};

TEST_F(PrefetchReads, EachStepSeesTheValueItsPreviousStepReceivedAtMostOneStepStale) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  const double before = ReadPrefetcher::PrefetchedTotal();
  constexpr int kSteps = 8;
  double calls = 0;
  for (int k = 1; k <= kSteps; ++k) {
    if (k == 3) calls = RecvTensorCalls();
    const float seen = Step(sess, prefetching_);
    if (k == 1) {
      EXPECT_EQ(seen, 0) << "the first step has nothing prefetched: it reads afresh";
    } else {
      EXPECT_TRUE(seen == k - 2 || seen == k - 1) << "step " << k << " saw " << seen;
    }
  }
  // Every step but the first was answered with the previous step's value.
  EXPECT_EQ(ReadPrefetcher::PrefetchedTotal() - before, kSteps - 1);
  // v (prefetched) and `other` ride with the ps's fetch of the gradient (a
  // push): one call a step (the marker waits for `train` through the step,
  // not through a token).
  EXPECT_NEAR((RecvTensorCalls() - calls) / (kSteps - 2), 1, 0.3);
  auto v = sess.Run({v_});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), kSteps) << "every step's update was applied";

  // Another partition ran on the worker in between (a step of another
  // signature reading v there): the next step reads afresh.
  auto read = sess.Run({seen_});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0].scalar<float>(), kSteps);
  const double between = ReadPrefetcher::PrefetchedTotal();
  EXPECT_EQ(Step(sess, prefetching_), kSteps);
  EXPECT_EQ(ReadPrefetcher::PrefetchedTotal(), between);
}

TEST_F(PrefetchReads, TrainingWithoutTheMarkerReadsEveryStepAfresh) {
  Session sess(target_, Options());
  ASSERT_TRUE(sess.Run({}, {}, {init_}).ok());
  const double before = ReadPrefetcher::PrefetchedTotal();
  for (int k = 1; k <= 6; ++k) EXPECT_EQ(Step(sess, train_), k - 1) << "step " << k;
  EXPECT_EQ(ReadPrefetcher::PrefetchedTotal(), before);
}

}  // namespace
}  // namespace distflow

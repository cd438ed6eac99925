// While loops and a cond in a grpc:// session of an in-process cluster
// (1 ps + 1 worker): a loop on the worker reading a variable on the ps as a
// loop invariant (a cross-task edge into the loop's Enter), and a loop whose
// body runs partly on the ps, so every iteration crosses tasks both ways
// (the frame and iteration are in the rendezvous keys, and the ps runs a
// control loop driven by the worker's LoopCond: placement/loop_skeletons.h).
#include "distflow/control_flow.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using Outs = std::vector<Output>;

TEST(ControlFlowCluster, LoopOnWorkerReadsVariableOnPs) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string target;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  ASSERT_FALSE(target.empty());

  Scope root = Scope::NewRootScope();
  Output step = ops::MakeVariable(root.WithDevice("/job:ps/task:0").WithOpName("step"), ops::Const(root, 2.0));
  Scope worker = root.WithDevice("/job:worker/task:0");
  Output n = ops::Placeholder(worker, DT_INT32, PartialShape({}));
  ops::WhileOptions opts;
  opts.invariants = {n, step};
  auto loop = ops::WhileLoop(
      worker, {ops::Const(worker, 0), ops::Const(worker, 1.0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], v[2]); },
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Outs> {
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Mul(s, v[1], v[3])};
      },
      opts);
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto picked = ops::Cond(
      worker, ops::Greater(worker, (*loop)[1], ops::Const(worker, 100.0)), {(*loop)[1]},
      [](const Scope& s, const Outs& in) -> absl::StatusOr<Outs> { return Outs{ops::Neg(s, in[0])}; },
      [](const Scope& s, const Outs& in) -> absl::StatusOr<Outs> { return Outs{in[0]}; });
  ASSERT_TRUE(picked.ok()) << picked.status();

  SessionOptions so;
  so.wait_for_cluster_ms = 20000;
  Session sess(target, so);
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  for (int nv : {0, 3, 8}) {
    auto r = sess.Run({{n, Tensor::Scalar<int32_t>(nv)}}, {(*loop)[1], (*picked)[0]});
    ASSERT_TRUE(r.ok()) << r.status();
    double want = 1;
    for (int i = 0; i < nv; ++i) want *= 2;
    EXPECT_EQ((*r)[0].scalar<double>(), want) << "n=" << nv;
    EXPECT_EQ((*r)[1].scalar<double>(), want > 100 ? -want : want) << "n=" << nv;
  }
}

TEST(ControlFlowCluster, LoopBodySpansPsAndWorker) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string target;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  ASSERT_FALSE(target.empty());

  Scope root = Scope::NewRootScope();
  Output w = ops::MakeVariable(root.WithDevice("/job:ps/task:0").WithOpName("w"), ops::Const(root, 3.0));
  Scope worker = root.WithDevice("/job:worker/task:0");
  Output n = ops::Placeholder(worker, DT_INT32, PartialShape({}));
  ops::WhileOptions opts;
  opts.invariants = {n, w};
  // x <- 3x + 1: the product on the ps, the sum on the worker.
  auto loop = ops::WhileLoop(
      worker, {ops::Const(worker, 0), ops::Const(worker, 1.0)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], v[2]); },
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Outs> {
        Output scaled = ops::Mul(s.WithDevice("/job:ps/task:0"), v[1], v[3]);
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), ops::Add(s, scaled, ops::Const(s, 1.0))};
      },
      opts);
  ASSERT_TRUE(loop.ok()) << loop.status();

  SessionOptions so;
  so.wait_for_cluster_ms = 20000;
  Session sess(target, so);
  ASSERT_TRUE(sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)}).ok());
  for (int nv : {0, 1, 5}) {
    auto r = sess.Run({{n, Tensor::Scalar<int32_t>(nv)}}, {(*loop)[0], (*loop)[1]});
    ASSERT_TRUE(r.ok()) << r.status();
    double want = 1;
    for (int i = 0; i < nv; ++i) want = 3 * want + 1;
    EXPECT_EQ((*r)[0].scalar<int32_t>(), nv);
    EXPECT_EQ((*r)[1].scalar<double>(), want) << "n=" << nv;
  }
}

// Untaken branches on the other task: their _Send sends "dead", so the
// _Recv on the other side is dead too instead of waiting for the step's
// deadline; at the top level and inside a loop spanning both tasks.
TEST(ControlFlowCluster, DeadBranchesCrossTasks) {
  auto spec = MakeLocalClusterSpec(1, 1);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto servers = StartLocalCluster(*spec);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::string target;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  ASSERT_FALSE(target.empty());

  Scope root = Scope::NewRootScope();
  Scope worker = root.WithDevice("/job:worker/task:0");
  Output x = ops::Placeholder(worker, DT_DOUBLE, PartialShape({}));
  Output p = ops::Placeholder(worker, DT_BOOL, PartialShape({}));
  auto ps_branch = [](const Scope& s, const Outs& in) -> absl::StatusOr<Outs> {
    return Outs{ops::Mul(s.WithDevice("/job:ps/task:0"), in[0], ops::Const(s, 10.0))};
  };
  auto worker_branch = [](const Scope& s, const Outs& in) -> absl::StatusOr<Outs> { return Outs{ops::Neg(s, in[0])}; };
  auto top = ops::Cond(worker, p, {x}, ps_branch, worker_branch);
  ASSERT_TRUE(top.ok()) << top.status();
  // for i < 4: x = even ? x * 10 (ps) : -x (worker); even = !even
  auto loop = ops::WhileLoop(
      worker, {ops::Const(worker, 0), x, ops::Const(worker, true)},
      [](const Scope& s, const Outs& v) -> absl::StatusOr<Output> { return ops::Less(s, v[0], ops::Const(s, 4)); },
      [&](const Scope& s, const Outs& v) -> absl::StatusOr<Outs> {
        auto c = ops::Cond(s, v[2], {v[1]}, ps_branch, worker_branch);
        if (!c.ok()) return c.status();
        return Outs{ops::Add(s, v[0], ops::Const(s, 1)), (*c)[0], ops::LogicalNot(s, v[2])};
      });
  ASSERT_TRUE(loop.ok()) << loop.status();

  SessionOptions so;
  so.wait_for_cluster_ms = 20000;
  Session sess(target, so);
  for (bool pv : {true, false, true}) {
    auto r = sess.Run({{x, Tensor::Scalar<double>(1.5)}, {p, Tensor::Scalar<bool>(pv)}}, {(*top)[0], (*loop)[1]});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)[0].scalar<double>(), pv ? 15.0 : -1.5);
    EXPECT_EQ((*r)[1].scalar<double>(), 150.0);  // 1.5 * 10, negated, * 10, negated
  }
}

}  // namespace
}  // namespace distflow

// A while loop and a cond in a grpc:// session of an in-process cluster
// (1 ps + 1 worker): the loop runs on the worker, reading a variable that
// lives on the ps as a loop invariant, so placement and partitioning see the
// loop's back edges and a cross-task edge into the loop's Enter. (A loop
// body split across tasks needs the frame and iteration in the rendezvous
// key, which is not there yet.)
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

}  // namespace
}  // namespace distflow

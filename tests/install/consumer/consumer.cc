// Uses an installed distflow as a user's program would: a graph run in
// process, the same variables on a two-task cluster over gRPC, and a few
// steps of gradient descent. Exits 0 only if every answer is right.
#include <cmath>
#include <cstdio>

#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"

namespace df = distflow;

int Fail(const char* what, const absl::Status& s) {
  std::fprintf(stderr, "consumer: %s: %s\n", what, s.ToString().c_str());
  return 1;
}

int main() {
  std::printf("distflow %s\n", df::Version());

  // In process: [1 2; 3 4] x [1; 1].
  {
    df::Scope root = df::Scope::NewRootScope();
    auto a = df::ops::Const(root, {1.f, 2.f, 3.f, 4.f}, df::TensorShape({2, 2}));
    auto x = df::ops::Const(root, {1.f, 1.f}, df::TensorShape({2, 1}));
    df::Session sess;
    auto out = sess.Run({df::ops::MatMul(root, a, x)});
    if (!out.ok()) return Fail("in-process run", out.status());
    if ((*out)[0].flat<float>()[0] != 3.f || (*out)[0].flat<float>()[1] != 7.f) {
      std::fprintf(stderr, "consumer: wrong product\n");
      return 1;
    }
  }

  // A cluster in this process: the variable on the ps, the update from the
  // worker, over gRPC; gradient descent on (w - 3)^2 moves w towards 3.
  auto spec = df::MakeLocalClusterSpec(1, 1);
  if (!spec.ok()) return Fail("cluster spec", spec.status());
  auto servers = df::StartLocalCluster(*spec);
  if (!servers.ok()) return Fail("starting the cluster", servers.status());
  std::string target;
  for (auto& s : *servers)
    if (s->task_name() == "/job:worker/replica:0/task:0") target = s->target();
  df::Scope root = df::Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto w = df::ops::MakeVariable(ps.WithOpName("w"), df::ops::Const(ps, 0.f));
  auto worker = root.WithDevice("/job:worker/task:0");
  auto diff = df::ops::Sub(worker, w, df::ops::Const(worker, 3.f));
  auto loss = df::ops::Mul(worker, diff, diff);
  df::GradientDescentOptimizer sgd(0.25);
  auto train = sgd.Minimize(root, loss);
  if (!train.ok()) return Fail("building the update", train.status());
  auto init = df::ops::GlobalVariablesInitializer(root);
  df::Session sess(target);
  if (auto r = sess.Run({}, {}, {init}); !r.ok()) return Fail("initialising", r.status());
  for (int i = 0; i < 20; ++i)
    if (auto r = sess.Run({}, {}, {*train}); !r.ok()) return Fail("training", r.status());
  auto got = sess.Run({w});
  if (!got.ok()) return Fail("reading w", got.status());
  const float v = (*got)[0].scalar<float>();
  std::printf("w after 20 steps: %.6f\n", v);
  if (std::fabs(v - 3.f) > 1e-3f) {
    std::fprintf(stderr, "consumer: w did not reach 3\n");
    return 1;
  }
  for (auto& s : *servers) s->Stop();
  std::printf("consumer: ok\n");
  return 0;
}

// The seeds' tf.device example on a real cluster: weights_1/biases_1 on
// /job:ps/task:0, weights_2/biases_2 on /job:ps/task:1, the two-layer model
// on a worker task, trained by gradient descent through a grpc:// session.
// Afterwards a second, independent session reads the variables from the ps
// tasks to show that the updates happened there.
//
//   distflow-server --cluster_spec=$SPEC --job_name=ps --task_index=0 &
//   distflow-server --cluster_spec=$SPEC --job_name=ps --task_index=1 &
//   distflow-server --cluster_spec=$SPEC --job_name=worker --task_index=0 &
//   ps_worker_placement --target=grpc://localhost:2224 --worker_task=0
#include <cmath>
#include <cstdio>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"

ABSL_FLAG(std::string, target, "grpc://localhost:2224", "a task of the cluster");
ABSL_FLAG(int, worker_task, 0, "the worker task that computes");
ABSL_FLAG(int, steps, 200, "training steps");

namespace df = distflow;

namespace {

// Builds the seed's model in `root`; returns the variables and the loss pieces.
struct Model {
  df::Output x, y, loss, w1, b1, w2, b2;
  df::Operation train, init;
};

Model Build(const df::Scope& root, int worker_task, bool with_training) {
  Model m;
  auto ps0 = root.WithDevice("/job:ps/task:0");
  auto ps1 = root.WithDevice("/job:ps/task:1");
  m.w1 = df::ops::MakeVariable(ps0.WithOpName("weights_1"), df::ops::TruncatedNormal(ps0, {4, 16}, df::DT_FLOAT, 1));
  m.b1 = df::ops::MakeVariable(ps0.WithOpName("biases_1"), df::ops::Fill(ps0, {16}, df::ops::Const(ps0, 0.f)));
  m.w2 = df::ops::MakeVariable(ps1.WithOpName("weights_2"), df::ops::TruncatedNormal(ps1, {16, 1}, df::DT_FLOAT, 2));
  m.b2 = df::ops::MakeVariable(ps1.WithOpName("biases_2"), df::ops::Fill(ps1, {1}, df::ops::Const(ps1, 0.f)));
  if (!with_training) return m;
  auto worker = root.WithDevice("/job:worker/task:" + std::to_string(worker_task));
  m.x = df::ops::Placeholder(worker.WithOpName("input"), df::DT_FLOAT, {-1, 4});
  m.y = df::ops::Placeholder(worker.WithOpName("labels"), df::DT_FLOAT, {-1, 1});
  auto layer_1 = df::ops::Raw(worker, "Relu", {df::ops::MatMul(worker, m.x, m.w1) + m.b1});
  auto logits = df::ops::MatMul(worker, df::Output(layer_1, 0, worker), m.w2) + m.b2;
  auto diff = logits - m.y;
  m.loss = df::ops::Mean(worker, diff * diff, {0, 1});
  df::GradientDescentOptimizer opt(0.05);
  auto train = opt.Minimize(worker, m.loss);
  if (train.ok())
    m.train = *train;
  else
    root.UpdateStatus(train.status());
  m.init = df::ops::GlobalVariablesInitializer(root);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  df::SessionOptions options;
  options.wait_for_cluster_ms = 60000;

  df::Scope root = df::Scope::NewRootScope();
  Model m = Build(root, absl::GetFlag(FLAGS_worker_task), true);
  if (!root.ok()) {
    std::fprintf(stderr, "%s\n", root.status().ToString().c_str());
    return 1;
  }
  df::Session sess(target, options);
  if (auto s = sess.Run({}, {}, {m.init}); !s.ok()) {
    std::fprintf(stderr, "init: %s\n", s.status().ToString().c_str());
    return 1;
  }
  auto before = sess.Run({m.w2});
  // Data: y = sum of x, learned by the two-layer model.
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1, 1);
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < absl::GetFlag(FLAGS_steps); ++step) {
    std::vector<float> xs(32 * 4), ys(32);
    for (int i = 0; i < 32; ++i) {
      float sum = 0;
      for (int k = 0; k < 4; ++k) sum += xs[static_cast<size_t>(i * 4 + k)] = u(gen);
      ys[static_cast<size_t>(i)] = sum;
    }
    auto out = sess.Run({{m.x, df::Tensor::FromVector<float>(xs, df::TensorShape({32, 4}))},
                         {m.y, df::Tensor::FromVector<float>(ys, df::TensorShape({32, 1}))}},
                        {m.loss}, {m.train});
    if (!out.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, out.status().ToString().c_str());
      return 1;
    }
    last_loss = (*out)[0].scalar<float>();
    if (step == 0) first_loss = last_loss;
    if (step % 50 == 0) std::printf("step %d loss %.4f\n", step, last_loss);
  }
  std::printf("loss went from %.4f to %.4f\n", first_loss, last_loss);

  // A second, independent session (its own graph naming the same variables)
  // reads them from the ps tasks.
  df::Scope other = df::Scope::NewRootScope();
  auto ps1 = other.WithDevice("/job:ps/task:1");
  auto w2 = df::ops::Variable(ps1.WithOpName("weights_2"), {16, 1}, df::DT_FLOAT);
  df::Session reader(target, options);
  auto after = reader.Run({w2});
  if (!before.ok() || !after.ok()) {
    std::fprintf(stderr, "reading weights_2 failed\n");
    return 1;
  }
  double change = 0;
  for (int i = 0; i < 16; ++i)
    change += std::fabs((*after)[0].flat<float>()[static_cast<size_t>(i)] -
                        (*before)[0].flat<float>()[static_cast<size_t>(i)]);
  std::printf("weights_2 on /job:ps/task:1 changed by %.4f (sum of |delta|), read from a second session\n", change);
  return (change > 0 && last_loss < first_loss) ? 0 : 4;
}

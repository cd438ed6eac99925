// Trains a softmax classifier on Fashion-MNIST in one process: the graph is
// built with the C++ API, gradients are written by hand (automatic
// differentiation comes with the training layer), and the data is read from
// Debian's dataset-fashion-mnist package. Exits non-zero if the final test
// accuracy is below --min_accuracy.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "distflow/data/mnist.h"
#include "distflow/distflow.h"

ABSL_FLAG(int, steps, 1000, "training steps");
ABSL_FLAG(int, batch_size, 100, "examples per step");
ABSL_FLAG(double, learning_rate, 0.1, "gradient descent step size");
ABSL_FLAG(std::string, data_dir, distflow::data::kDefaultFashionMnistDir, "directory of the IDX files");
ABSL_FLAG(int, seed, 1, "shuffling seed");
ABSL_FLAG(int, print_every, 100, "print progress every N steps");
ABSL_FLAG(double, min_accuracy, 0.0, "fail if the test accuracy ends below this");

namespace df = distflow;
using df::ops::Const;

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto data = df::data::ReadDataSets(absl::GetFlag(FLAGS_data_dir), 5000, absl::GetFlag(FLAGS_seed));
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 1;
  }

  df::Scope root = df::Scope::NewRootScope();
  auto x = df::ops::Placeholder(root.WithOpName("images"), df::DT_FLOAT, df::PartialShape({-1, 784}));
  auto labels = df::ops::Placeholder(root.WithOpName("labels"), df::DT_INT32, df::PartialShape({-1}));
  auto w = df::ops::MakeVariable(root.WithOpName("weights"), df::ops::Fill(root, {784, 10}, Const(root, 0.f)));
  auto b = df::ops::MakeVariable(root.WithOpName("biases"), df::ops::Fill(root, {10}, Const(root, 0.f)));

  auto logits = df::ops::MatMul(root, x, w) + b;
  auto shifted = logits - df::ops::Max(root, logits, {1}, /*keep_dims=*/true);
  auto e = df::ops::Exp(root, shifted);
  auto total = df::ops::Sum(root, e, {1}, true);
  auto probs = e / total;
  auto log_probs = shifted - df::ops::Log(root, total);
  auto onehot = df::ops::OneHot(root, labels, 10, Const(root, 1.f), Const(root, 0.f));
  auto loss = -df::ops::Mean(root, df::ops::Sum(root, onehot * log_probs, {1}), {0});

  // d loss / d logits = (probs - onehot) / batch.
  auto batch = df::ops::Cast(root, df::ops::Slice(root, df::ops::Shape(root, x), {0}, {1}), df::DT_FLOAT);
  auto grad_logits = (probs - onehot) / batch;
  auto lr = Const(root, static_cast<float>(absl::GetFlag(FLAGS_learning_rate)));
  auto step_w = df::ops::AssignSub(root, w, df::ops::MatMul(root, x, grad_logits, true) * lr);
  auto step_b = df::ops::AssignSub(root, b, df::ops::Sum(root, grad_logits, {0}) * lr);
  auto train = df::ops::Group(root.WithOpName("train"), {step_w.op(), step_b.op()});

  auto predicted = df::ops::ArgMax(root, logits, 1);
  auto correct = df::ops::Equal(root, predicted, df::ops::Cast(root, labels, df::DT_INT64));
  auto accuracy = df::ops::Mean(root, df::ops::Cast(root, correct, df::DT_FLOAT), {0});
  auto init = df::ops::GlobalVariablesInitializer(root);
  if (!root.ok()) {
    std::fprintf(stderr, "building the graph failed: %s\n", root.status().ToString().c_str());
    return 1;
  }

  df::Session sess;
  if (auto s = sess.Run({}, {}, {init}); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }
  const int steps = absl::GetFlag(FLAGS_steps);
  for (int step = 1; step <= steps; ++step) {
    auto [bx, by] = data->train.NextBatch(absl::GetFlag(FLAGS_batch_size));
    auto out = sess.Run({{x, bx}, {labels, by}}, {loss, accuracy}, {train});
    if (!out.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, out.status().ToString().c_str());
      return 1;
    }
    if (step % absl::GetFlag(FLAGS_print_every) == 0 || step == steps) {
      std::printf("step %5d  loss %.4f  batch accuracy %.3f\n", step, (*out)[0].scalar<float>(),
                  (*out)[1].scalar<float>());
    }
  }
  auto test = sess.Run({{x, data->test.images()}, {labels, data->test.labels()}}, {accuracy});
  if (!test.ok()) {
    std::fprintf(stderr, "%s\n", test.status().ToString().c_str());
    return 1;
  }
  float acc = (*test)[0].scalar<float>();
  std::printf("test accuracy %.4f on %lld Fashion-MNIST images\n", acc,
              static_cast<long long>(data->test.num_examples()));
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

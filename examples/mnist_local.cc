// The book's CNN ("Distributed Example") trained in one process on
// Fashion-MNIST: conv 5x5x32 + ReLU, max-pool 2x2, conv 5x5x64 + ReLU,
// max-pool 2x2, flatten, fully connected 500 + ReLU, fully connected 10;
// softmax cross-entropy, Adam (1e-4), batch 50. Prints step, loss and batch
// accuracy every --print_every steps, then the accuracy on the 10,000 test
// images (evaluated --eval_chunk images at a time). Exits with code 3 if that
// accuracy is below --min_accuracy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "distflow/data/mnist.h"
#include "distflow/distflow.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"

ABSL_FLAG(int, steps, 5000, "training steps");
ABSL_FLAG(int, batch_size, 50, "examples per step");
ABSL_FLAG(double, learning_rate, 1e-4, "Adam learning rate");
ABSL_FLAG(std::string, data_dir, distflow::data::kDefaultFashionMnistDir, "directory of the IDX files");
ABSL_FLAG(int, threads, 0, "intra-op threads (0: all cores)");
ABSL_FLAG(int, seed, 1, "seed of the weight initialisation and the shuffling");
ABSL_FLAG(int, print_every, 100, "print progress every N steps");
ABSL_FLAG(int, eval_chunk, 1000, "test images evaluated per run");
ABSL_FLAG(double, min_accuracy, 0.0, "fail (exit code 3) if the test accuracy ends below this");

namespace df = distflow;
namespace layers = distflow::layers;

namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The network of the book's program, on NHWC images.
df::Output Net(const df::Scope& s, const df::Output& images, int64_t seed) {
  int64_t next_seed = seed * 100;
  auto init = [&next_seed]() {
    layers::LayerInitializers i;
    i.weights = layers::glorot_uniform(++next_seed);
    return i;
  };
  auto net = layers::conv2d(s, images, 32, {5, 5}, 1, "SAME", layers::kRelu, "conv1", init());
  net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool1");
  net = layers::conv2d(s, net, 64, {5, 5}, 1, "SAME", layers::kRelu, "conv2", init());
  net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool2");
  net = layers::flatten(s, net, "flatten");
  net = layers::fully_connected(s, net, 500, layers::kRelu, "fully_connected", init());
  return layers::fully_connected(s, net, 10, layers::kNoActivation, "pred", init());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int seed = absl::GetFlag(FLAGS_seed);
  auto data = df::data::ReadDataSets(absl::GetFlag(FLAGS_data_dir), 5000, static_cast<uint64_t>(seed));
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 1;
  }

  df::Scope root = df::Scope::NewRootScope();
  auto x = df::ops::Placeholder(root.WithOpName("x-input"), df::DT_FLOAT, df::PartialShape({-1, 784}));
  auto labels = df::ops::Placeholder(root.WithOpName("y-input"), df::DT_INT32, df::PartialShape({-1}));
  auto images = df::ops::Reshape(root, x, std::vector<int64_t>{-1, 28, 28, 1});
  auto logits = Net(root, images, seed);

  // SparseSoftmaxCrossEntropyWithLogits: (per-example loss, backprop).
  auto xent = df::ops::Raw(root.WithOpName("xent"), "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  auto loss = df::ops::Mean(root.WithOpName("cross_entropy"), df::Output(xent, 0, root), {0});

  auto global_step = df::CreateGlobalStep(root);
  df::AdamOptimizer adam(absl::GetFlag(FLAGS_learning_rate));
  auto train = adam.Minimize(root, loss, &global_step);
  if (!train.ok()) {
    std::fprintf(stderr, "building the optimizer failed: %s\n", train.status().ToString().c_str());
    return 1;
  }

  auto predicted = df::ops::ArgMax(root, logits, 1);
  auto correct = df::ops::Equal(root, predicted, df::ops::Cast(root, labels, df::DT_INT64));
  auto num_correct = df::ops::Sum(root, df::ops::Cast(root, correct, df::DT_FLOAT), {0});
  auto accuracy = df::ops::Mean(root, df::ops::Cast(root, correct, df::DT_FLOAT), {0});
  auto init = df::ops::GlobalVariablesInitializer(root);
  if (!root.ok()) {
    std::fprintf(stderr, "building the graph failed: %s\n", root.status().ToString().c_str());
    return 1;
  }

  df::SessionOptions options;
  options.intra_op_threads = absl::GetFlag(FLAGS_threads);
  df::Session sess("", options);
  if (auto s = sess.Run({}, {}, {init}); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }

  const int steps = absl::GetFlag(FLAGS_steps);
  const int batch_size = absl::GetFlag(FLAGS_batch_size);
  const int print_every = absl::GetFlag(FLAGS_print_every);
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 1; step <= steps; ++step) {
    auto [bx, by] = data->train.NextBatch(batch_size);
    auto out = sess.Run({{x, bx}, {labels, by}}, {loss, accuracy}, {*train});
    if (!out.ok()) {
      std::fprintf(stderr, "step %d: %s\n", step, out.status().ToString().c_str());
      return 1;
    }
    if ((print_every > 0 && step % print_every == 0) || step == steps) {
      std::printf("step %5d  loss %.4f  batch accuracy %.3f  (%.1f s)\n", step, (*out)[0].scalar<float>(),
                  (*out)[1].scalar<float>(), SecondsSince(t0));
      std::fflush(stdout);
    }
  }
  const double train_seconds = SecondsSince(t0);

  // The test set in chunks, to bound the activations' memory.
  const df::Tensor& test_x = data->test.images();
  const df::Tensor& test_y = data->test.labels();
  const int64_t n = data->test.num_examples();
  const int64_t chunk = std::max(1, absl::GetFlag(FLAGS_eval_chunk));
  double right = 0;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    auto out = sess.Run({{x, test_x.Slice(begin, end)}, {labels, test_y.Slice(begin, end)}}, {num_correct});
    if (!out.ok()) {
      std::fprintf(stderr, "evaluation: %s\n", out.status().ToString().c_str());
      return 1;
    }
    right += (*out)[0].scalar<float>();
  }
  const double acc = n > 0 ? right / static_cast<double>(n) : 0.0;
  std::printf("test accuracy %.4f on %lld Fashion-MNIST images after %d steps (training %.1f s, %.1f ms/step)\n", acc,
              static_cast<long long>(n), steps, train_seconds, steps > 0 ? 1e3 * train_seconds / steps : 0.0);
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

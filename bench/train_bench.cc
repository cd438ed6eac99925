// One training step through the whole stack (client graph, LocalSession,
// executor, kernels), fed with random data of the real shapes:
//
// * BM_CnnStep: the book's CNN (examples/mnist_local.cc): conv 5x5x32 + ReLU
//   (SAME), max-pool 2x2, conv 5x5x64 + ReLU, max-pool 2x2, flatten,
//   fully connected 500 + ReLU, fully connected 10; sparse softmax
//   cross-entropy; Adam; batch 50.
// * BM_MlpStep: a small MLP 784-256(ReLU)-10, sparse softmax cross-entropy,
//   plain SGD, batch 64.
//
// Argument: intra-op threads. Counters: steps/s and an effective GFLOP/s
// (the step's multiply-add FLOPs, counted below, over the time).
//
// FLOPs of one CNN step, batch B = 50 (2 flops per multiply-add):
//   conv1 fwd  2*B*28*28*32*(5*5*1)   =   62.7 MFLOP
//   conv2 fwd  2*B*14*14*64*(5*5*32)  = 1003.5 MFLOP
//   fc1   fwd  2*B*3136*500           =  156.8 MFLOP
//   fc2   fwd  2*B*500*10             =    0.5 MFLOP
//   backward: filter/weight gradients of all four (same as their forwards)
//   plus input gradients of conv2, fc1, fc2 (conv1's input is the data and
//   needs none): 1223.5 + 1160.8 = 2384.3 MFLOP
//   total 3607.8 MFLOP = 3.61 GFLOP per step (3.67 if conv1's input
//   gradient were also computed; element-wise ops, pooling and Adam add
//   ~0.01 GFLOP and are not counted).
// MLP step, batch 64: fwd 2*64*(784*256 + 256*10) = 26.0 MFLOP; backward:
//   weight gradients of both layers + input gradient of the second = 26.3
//   MFLOP; total 52.4 MFLOP.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "distflow/distflow.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"

namespace distflow {
namespace {

constexpr double kCnnFlops = 2.0 * 50 * (28 * 28 * 32 * 25 * 1)         // conv1 fwd
                             + 2.0 * 50 * (28 * 28 * 32 * 25 * 1)       // conv1 filter grad
                             + 3 * 2.0 * 50 * (14 * 14 * 64 * 25 * 32)  // conv2 fwd, input grad, filter grad
                             + 3 * 2.0 * 50 * (3136 * 500)              // fc1
                             + 3 * 2.0 * 50 * (500 * 10);               // fc2
constexpr double kMlpFlops = 2.0 * 64 * (784 * 256)                     // fc1 fwd
                             + 2.0 * 64 * (784 * 256)                   // fc1 weight grad
                             + 3 * 2.0 * 64 * (256 * 10);               // fc2

Tensor RandomImages(int64_t n, unsigned seed) {
  Tensor t(DT_FLOAT, TensorShape({n, 784}));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(0.0f, 1.0f);
  for (float& x : t.flat<float>()) x = d(gen);
  return t;
}

Tensor RandomLabels(int64_t n, unsigned seed) {
  Tensor t(DT_INT32, TensorShape({n}));
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> d(0, 9);
  for (int32_t& x : t.flat<int32_t>()) x = d(gen);
  return t;
}

// A graph, its session and one batch; Step() runs one training step.
struct Model {
  Scope root = Scope::NewRootScope();
  Output x, labels, loss;
  Operation train;
  Tensor bx, by;
  std::unique_ptr<Session> sess;
  std::string error;

  // `net` maps the [batch,784] placeholder to logits.
  template <typename Net, typename MakeOptimizer>
  Model(int threads, int64_t batch, Net net, MakeOptimizer make_optimizer) {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 784}));
    labels = ops::Placeholder(root.WithOpName("y"), DT_INT32, PartialShape({-1}));
    Output logits = net(root, x);
    Operation xent = ops::Raw(root.WithOpName("xent"), "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
    loss = ops::Mean(root, Output(xent, 0, root), {0});
    auto opt = make_optimizer();
    absl::StatusOr<Operation> t = opt->Minimize(root, loss);
    if (!t.ok()) {
      error = t.status().ToString();
      return;
    }
    train = *t;
    Operation init = ops::GlobalVariablesInitializer(root);
    if (!root.ok()) {
      error = root.status().ToString();
      return;
    }
    SessionOptions options;
    options.intra_op_threads = threads;
    sess = std::make_unique<Session>("", options);
    if (auto s = sess->Run({}, {}, {init}); !s.ok()) {
      error = s.status().ToString();
      return;
    }
    bx = RandomImages(batch, 1);
    by = RandomLabels(batch, 2);
  }

  absl::Status Step() { return sess->Run({{x, bx}, {labels, by}}, {}, {train}).status(); }
};

Output Cnn(const Scope& s, const Output& x) {
  auto net = ops::Reshape(s, x, std::vector<int64_t>{-1, 28, 28, 1});
  net = layers::conv2d(s, net, 32, {5, 5}, 1, "SAME", layers::kRelu, "conv1");
  net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool1");
  net = layers::conv2d(s, net, 64, {5, 5}, 1, "SAME", layers::kRelu, "conv2");
  net = layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool2");
  net = layers::flatten(s, net, "flatten");
  net = layers::fully_connected(s, net, 500, layers::kRelu, "fully_connected");
  return layers::fully_connected(s, net, 10, layers::kNoActivation, "pred");
}

Output Mlp(const Scope& s, const Output& x) {
  auto h = layers::fully_connected(s, x, 256, layers::kRelu, "hidden");
  return layers::fully_connected(s, h, 10, layers::kNoActivation, "logits");
}

void RunSteps(benchmark::State& state, Model& m, double flops) {
  if (!m.error.empty()) {
    state.SkipWithError(m.error.c_str());
    return;
  }
  // Warm up: executor construction, first allocations, oneDNN's JIT.
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = m.Step(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  for (auto _ : state) {
    if (absl::Status s = m.Step(); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["steps/s"] = benchmark::Counter(it, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9 * it, benchmark::Counter::kIsRate);
}

void BM_CnnStep(benchmark::State& state) {
  Model m(static_cast<int>(state.range(0)), 50, Cnn, [] { return std::make_unique<AdamOptimizer>(1e-4); });
  RunSteps(state, m, kCnnFlops);
}

void BM_MlpStep(benchmark::State& state) {
  Model m(static_cast<int>(state.range(0)), 64, Mlp, [] { return std::make_unique<GradientDescentOptimizer>(0.1); });
  RunSteps(state, m, kMlpFlops);
}

BENCHMARK(BM_CnnStep)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MlpStep)->ArgName("threads")->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace distflow

BENCHMARK_MAIN();

// A few Adam steps of a small CNN (conv + bias + ReLU, max-pool, dense) on 32
// Fashion-MNIST test images, built against an installed distflow. The
// portability test (tests/install/portable_test.sh) runs it on this CPU and
// under emulated CPUs without AVX-512 or AVX2, where each run must train and
// use the kernel variant that CPU supports. Prints the kernels' instruction
// set, the loss of each step and "portable_train: ok" if the loss fell.
//   portable_train [IDX_DIR] [STEPS]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "distflow/data/mnist.h"
#include "distflow/distflow.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "distflow/version.h"

namespace df = distflow;
namespace layers = distflow::layers;

namespace {

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "portable_train: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : df::data::kDefaultFashionMnistDir;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 4;
  std::printf("%s\n", df::KernelIsaSummary().c_str());
  auto images = df::data::ReadIdxImages(dir + "/t10k-images-idx3-ubyte.gz");
  if (!images.ok()) return Fail("reading images", images.status());
  auto labels = df::data::ReadIdxLabels(dir + "/t10k-labels-idx1-ubyte.gz");
  if (!labels.ok()) return Fail("reading labels", labels.status());
  const df::Tensor bx = images->Slice(0, 32), by = labels->Slice(0, 32);

  df::Scope root = df::Scope::NewRootScope();
  auto x = df::ops::Placeholder(root.WithOpName("x"), df::DT_FLOAT, df::PartialShape({-1, 784}));
  auto y = df::ops::Placeholder(root.WithOpName("y"), df::DT_INT32, df::PartialShape({-1}));
  auto net = df::ops::Reshape(root, x, std::vector<int64_t>{-1, 28, 28, 1});
  layers::LayerInitializers init1, init2;
  init1.weights = layers::glorot_uniform(1);
  init2.weights = layers::glorot_uniform(2);
  net = layers::conv2d(root, net, 16, {5, 5}, 1, "SAME", layers::kRelu, "conv1", init1);
  net = layers::max_pool2d(root, net, {2, 2}, 2, "VALID", "pool1");
  net = layers::flatten(root, net, "flatten");
  auto logits = layers::fully_connected(root, net, 10, layers::kNoActivation, "pred", init2);
  auto xent = df::ops::Raw(root.WithOpName("xent"), "SparseSoftmaxCrossEntropyWithLogits", {logits, y});
  auto loss = df::ops::Mean(root.WithOpName("loss"), df::Output(xent, 0, root), {0});
  df::AdamOptimizer adam(1e-2);
  auto train = adam.Minimize(root, loss);
  if (!train.ok()) return Fail("building the optimizer", train.status());
  auto init = df::ops::GlobalVariablesInitializer(root);
  if (!root.ok()) return Fail("building the graph", root.status());

  df::SessionOptions options;
  options.intra_op_threads = 1;
  df::Session sess("", options);
  if (auto r = sess.Run({}, {}, {init}); !r.ok()) return Fail("initialising", r.status());
  float first = 0, last = 0;
  for (int step = 1; step <= steps; ++step) {
    auto out = sess.Run({{x, bx}, {y, by}}, {loss}, {*train});
    if (!out.ok()) return Fail("step " + std::to_string(step), out.status());
    last = (*out)[0].scalar<float>();
    if (step == 1) first = last;
    std::printf("step %d loss %.6f\n", step, last);
  }
  if (!(last < first)) {
    std::fprintf(stderr, "portable_train: the loss did not fall (%.6f -> %.6f)\n", first, last);
    return 1;
  }
  std::printf("portable_train: ok\n");
  return 0;
}

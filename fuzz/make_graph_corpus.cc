// Writes the seed corpus for graph_import_fuzzer: serialized GraphDefs of the
// kinds a master and its workers receive — constants and placeholders, a
// variable updated in place, the seeds' two-layer model with device
// constraints, and a small CNN with its gradients and an Adam step. Run:
//   build/fuzz/make_graph_corpus fuzz/corpus/graph_import
#include <cstdio>
#include <string>
#include <vector>

#include "base/env.h"
#include "distflow/distflow.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "proto/graph.pb.h"

namespace df = distflow;

namespace {

df::proto::GraphDef Basics() {
  df::Scope root = df::Scope::NewRootScope();
  auto x = df::ops::Placeholder(root.WithOpName("x"), df::DT_FLOAT, {-1, 3});
  auto c = df::ops::Const(root, {1.f, 2.f, 3.f}, df::TensorShape({3}));
  auto y = df::ops::Sum(root, df::ops::Mul(root, x, c), {1});
  auto s = df::ops::Const(root.WithOpName("greeting"), "Hello, distributed TensorFlow!");
  (void)y;
  (void)s;
  df::proto::GraphDef g;
  root.ToGraphDef(&g);
  return g;
}

df::proto::GraphDef Counter() {
  df::Scope root = df::Scope::NewRootScope();
  auto ps = root.WithDevice("/job:ps/task:0");
  auto v = df::ops::MakeVariable(ps.WithOpName("counter"), df::ops::Const(ps, int64_t{0}));
  auto incr = df::ops::AssignAdd(root.WithDevice("/job:worker/task:0"), v, df::ops::Const(ps, int64_t{1}));
  auto init = df::ops::GlobalVariablesInitializer(root);
  (void)incr;
  (void)init;
  df::proto::GraphDef g;
  root.ToGraphDef(&g);
  return g;
}

df::proto::GraphDef TwoLayer() {
  df::Scope root = df::Scope::NewRootScope();
  auto ps0 = root.WithDevice("/job:ps/task:0");
  auto ps1 = root.WithDevice("/job:ps/task:1");
  auto w1 = df::ops::MakeVariable(ps0.WithOpName("weights_1"), df::ops::TruncatedNormal(ps0, {4, 8}));
  auto w2 = df::ops::MakeVariable(ps1.WithOpName("weights_2"), df::ops::TruncatedNormal(ps1, {8, 1}));
  auto worker = root.WithDevice("/job:worker/task:0");
  auto x = df::ops::Placeholder(worker.WithOpName("input"), df::DT_FLOAT, {-1, 4});
  auto y = df::ops::Placeholder(worker.WithOpName("labels"), df::DT_FLOAT, {-1, 1});
  auto h = df::ops::Raw(worker, "Relu", {df::ops::MatMul(worker, x, w1)});
  auto d = df::ops::MatMul(worker, df::Output(h, 0, worker), w2) - y;
  auto loss = df::ops::Mean(worker, d * d, {0, 1});
  df::GradientDescentOptimizer opt(0.05);
  (void)opt.Minimize(worker, loss);
  df::proto::GraphDef g;
  root.ToGraphDef(&g);
  return g;
}

df::proto::GraphDef Cnn() {
  df::Scope root = df::Scope::NewRootScope();
  auto images = df::ops::Placeholder(root.WithOpName("images"), df::DT_FLOAT, {-1, 784});
  auto labels = df::ops::Placeholder(root.WithOpName("labels"), df::DT_INT32, {-1});
  auto x = df::ops::Reshape(root, images, {-1, 28, 28, 1});
  auto net = df::layers::conv2d(root, x, 4, {5, 5}, 1, "SAME", df::layers::kRelu, "conv1");
  net = df::layers::max_pool2d(root, net, {2, 2}, 2, "VALID", "pool1");
  net = df::layers::flatten(root, net, "flatten");
  auto logits = df::layers::fully_connected(root, net, 10, df::layers::kNoActivation, "logits");
  auto xent = df::ops::Raw(root, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  auto loss = df::ops::Mean(root, df::Output(xent, 0, root), {0});
  auto step = df::CreateGlobalStep(root);
  df::AdamOptimizer adam(1e-3);
  (void)adam.Minimize(root, loss, &step);
  df::proto::GraphDef g;
  root.ToGraphDef(&g);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::vector<df::proto::GraphDef> seeds = {Basics(), Counter(), TwoLayer(), Cnn()};
  int i = 0;
  for (const df::proto::GraphDef& g : seeds) {
    std::string path = std::string(argv[1]) + "/seed_" + std::to_string(i++);
    absl::Status s = df::Env::Default()->WriteFileAtomically(path, g.SerializeAsString());
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), argv[1]);
  return 0;
}

// In-graph replication on Fashion-MNIST: one client builds the whole job.
// The variables live on the ps tasks; each worker task gets a tower, a copy
// of the network that computes the gradients of its slice of the batch; the
// towers' gradients are averaged on the ps task of each variable and applied
// in one update per step, so every step is synchronous by construction.
//
//   mnist_in_graph                                  # its own cluster: 1 ps + 2 workers, in this process
//   mnist_in_graph --cluster_spec='ps|h0:2222,worker|h1:2222;h2:2222'   # distflow-server tasks
//
// With --cluster_spec the client drives the first worker task's master and,
// when training is over, shuts the cluster down (--shutdown_cluster).
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "distflow/data/mnist.h"
#include "distflow/distflow.h"
#include "distflow/train/layers.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/replica_device_setter.h"

ABSL_FLAG(std::string, cluster_spec, "", "the cluster to use (default: start 1 ps + --workers in this process)");
ABSL_FLAG(int, workers, 2, "without --cluster_spec: worker tasks (towers) of the in-process cluster");
ABSL_FLAG(std::string, model, "cnn", "cnn (the book's network) or softmax");
ABSL_FLAG(int, train_steps, 1000, "update steps");
ABSL_FLAG(int, batch_size, 100, "examples per step, split evenly between the towers");
ABSL_FLAG(double, learning_rate, 1e-3, "Adam learning rate");
ABSL_FLAG(std::string, data_dir, distflow::data::kDefaultFashionMnistDir, "directory of the IDX files");
ABSL_FLAG(int, print_every, 100, "print every this many steps");
ABSL_FLAG(double, min_accuracy, 0.0, "exit 3 if test accuracy ends below this");
ABSL_FLAG(bool, shutdown_cluster, true, "with --cluster_spec: stop every task at the end");

namespace df = distflow;

namespace {

// The network's variables, made once and shared by every tower.
struct Params {
  std::vector<df::Output> vars;  // weights and biases, layer by layer
};

df::Output Var(const df::Scope& s, const std::string& name, std::vector<int64_t> shape, int64_t fan_in, int64_t fan_out,
               bool bias) {
  df::layers::InitContext c{shape, df::DT_FLOAT, fan_in, fan_out};
  df::Scope init = s.NewSubScope(name + "_init");
  df::Output initial = bias ? df::layers::zeros()(init, c) : df::layers::glorot_uniform()(init, c);
  return df::ops::MakeVariable(s.WithOpName(name), initial);
}

Params MakeParams(const df::Scope& s, const std::string& model) {
  Params p;
  if (model == "softmax") {
    p.vars = {Var(s, "logits/weights", {784, 10}, 784, 10, false), Var(s, "logits/biases", {10}, 784, 10, true)};
    return p;
  }
  p.vars = {Var(s, "conv1/weights", {5, 5, 1, 32}, 25, 800, false),
            Var(s, "conv1/biases", {32}, 25, 800, true),
            Var(s, "conv2/weights", {5, 5, 32, 64}, 800, 1600, false),
            Var(s, "conv2/biases", {64}, 800, 1600, true),
            Var(s, "fully_connected/weights", {7 * 7 * 64, 500}, 3136, 500, false),
            Var(s, "fully_connected/biases", {500}, 3136, 500, true),
            Var(s, "pred/weights", {500, 10}, 500, 10, false),
            Var(s, "pred/biases", {10}, 500, 10, true)};
  return p;
}

df::Output Out(const df::Scope& s, const df::Operation& op) { return df::Output(op, 0, s); }

df::Output Relu(const df::Scope& s, const df::Output& x) { return Out(s, df::ops::Raw(s, "Relu", {x})); }

df::Output Conv(const df::Scope& s, const df::Output& x, const df::Output& w, const df::Output& b) {
  df::Operation conv = df::ops::Raw(s, "Conv2D", {x, w}, {{"strides", {1, 1, 1, 1}}, {"padding", "SAME"}});
  return Relu(s, Out(s, df::ops::Raw(s, "BiasAdd", {Out(s, conv), b})));
}

df::Output Pool(const df::Scope& s, const df::Output& x) {
  return Out(
      s, df::ops::Raw(s, "MaxPool", {x}, {{"ksize", {1, 2, 2, 1}}, {"strides", {1, 2, 2, 1}}, {"padding", "VALID"}}));
}

// One tower: the logits of `images` with the shared parameters.
df::Output Tower(const df::Scope& s, const Params& p, const df::Output& images, const std::string& model) {
  const auto& v = p.vars;
  if (model == "softmax") return df::ops::Add(s, df::ops::MatMul(s, images, v[0]), v[1]);
  df::Output net = df::ops::Reshape(s, images, {-1, 28, 28, 1});
  net = Pool(s, Conv(s, net, v[0], v[1]));
  net = Pool(s, Conv(s, net, v[2], v[3]));
  net = df::ops::Reshape(s, net, {-1, 7 * 7 * 64});
  net = Relu(s, df::ops::Add(s, df::ops::MatMul(s, net, v[4]), v[5]));
  return df::ops::Add(s, df::ops::MatMul(s, net, v[6]), v[7]);
}

int Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "mnist_in_graph: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model != "cnn" && model != "softmax") {
    std::fprintf(stderr, "mnist_in_graph: --model is '%s'; use cnn or softmax\n", model.c_str());
    return 2;
  }
  // The cluster: given, or started here.
  std::vector<std::unique_ptr<df::Server>> local;
  absl::StatusOr<df::ClusterSpec> cluster;
  const bool external = !absl::GetFlag(FLAGS_cluster_spec).empty();
  if (external) {
    cluster = df::ClusterSpec::Parse(absl::GetFlag(FLAGS_cluster_spec));
    if (!cluster.ok()) {
      std::fprintf(stderr, "mnist_in_graph: bad --cluster_spec: %s\n", std::string(cluster.status().message()).c_str());
      return 2;
    }
  } else {
    cluster = df::MakeLocalClusterSpec(1, absl::GetFlag(FLAGS_workers));
    if (!cluster.ok()) return Die("making the local cluster", cluster.status());
    auto servers = df::StartLocalCluster(*cluster);
    if (!servers.ok()) return Die("starting the local cluster", servers.status());
    local = std::move(*servers);
  }
  const int towers = cluster->num_tasks("worker");
  if (towers < 1) {
    std::fprintf(stderr, "mnist_in_graph: the cluster has no worker tasks for the towers\n");
    return 2;
  }
  const int batch = absl::GetFlag(FLAGS_batch_size);
  if (batch < towers) {
    std::fprintf(stderr, "mnist_in_graph: --batch_size=%d is smaller than the %d towers\n", batch, towers);
    return 2;
  }
  auto data = df::data::ReadDataSets(absl::GetFlag(FLAGS_data_dir), 5000, 7);
  if (!data.ok()) return Die("reading data", data.status());

  // Variables on the ps tasks, greedy by bytes.
  df::Scope root = df::Scope::NewRootScope();
  df::ReplicaDeviceSetterOptions setter;
  setter.worker_device = "/job:worker/task:0";
  setter.strategy = df::PsStrategy::kGreedyBytes;
  df::Scope vs = root.WithDeviceFunction(df::ReplicaDeviceSetter(*cluster, setter));
  Params params = MakeParams(vs, model);
  df::Output global_step = df::CreateGlobalStep(vs);
  df::AdamOptimizer adam(absl::GetFlag(FLAGS_learning_rate));

  // A tower per worker task, each with its own slice of the batch.
  std::vector<df::Output> images(towers), labels(towers);
  std::vector<df::Optimizer::GradsAndVars> tower_grads;
  df::Output accuracy;
  std::vector<df::Output> losses;
  for (int t = 0; t < towers; ++t) {
    df::Scope ts = root.WithDevice(absl::StrCat("/job:worker/task:", t)).NewSubScope(absl::StrCat("tower_", t));
    images[t] = df::ops::Placeholder(ts.WithOpName("images"), df::DT_FLOAT, {-1, 784});
    labels[t] = df::ops::Placeholder(ts.WithOpName("labels"), df::DT_INT32, {-1});
    df::Output logits = Tower(ts, params, images[t], model);
    df::Operation xent = df::ops::Raw(ts, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels[t]});
    df::Output loss = df::ops::Mean(ts, df::Output(xent, 0, ts), {0});
    losses.push_back(loss);
    auto grads = adam.ComputeGradients(ts, loss, params.vars);
    if (!grads.ok()) return Die("building tower gradients", root.ok() ? grads.status() : root.status());
    tower_grads.push_back(*grads);
    if (t == 0) {
      auto correct = df::ops::Equal(ts, df::ops::ArgMax(ts, logits, 1), df::ops::Cast(ts, labels[t], df::DT_INT64));
      accuracy = df::ops::Mean(ts, df::ops::Cast(ts, correct, df::DT_FLOAT), {0});
    }
  }
  // The average of the towers' gradients, on each variable's ps task.
  df::Optimizer::GradsAndVars averaged;
  for (size_t v = 0; v < params.vars.size(); ++v) {
    const df::Output& var = params.vars[v];
    df::Scope at = root.WithDevice(var.op().device()).NewSubScope("average");
    std::vector<df::Output> gs;
    for (const auto& tg : tower_grads) gs.push_back(tg[v].first);
    averaged.emplace_back(
        df::ops::Mul(at, df::ops::AddN(at, gs), df::ops::Const(at, 1.0f / static_cast<float>(towers))), var);
  }
  auto train = adam.ApplyGradients(root, averaged, &global_step);
  if (!train.ok()) return Die("building the update", train.status());
  df::Output mean_loss = df::ops::Mean(root.WithDevice("/job:worker/task:0"), df::ops::Pack(root, losses), {0});
  df::Operation init = df::ops::GlobalVariablesInitializer(root);
  if (!root.ok()) return Die("building the graph", root.status());

  absl::StatusOr<std::string> chief = cluster->task_address("worker", 0);
  if (!chief.ok()) return Die("the first worker", chief.status());
  df::SessionOptions options;
  options.wait_for_cluster_ms = 60000;
  df::Session sess(absl::StrCat("grpc://", *chief), options);
  if (auto r = sess.Run({}, {}, {init}); !r.ok()) return Die("initialising", r.status());
  std::printf("In-graph replication: %d towers on /job:worker/task:0..%d, variables on %d ps task(s)\n", towers,
              towers - 1, cluster->num_tasks("ps"));
  std::fflush(stdout);

  const int64_t steps = absl::GetFlag(FLAGS_train_steps), every = absl::GetFlag(FLAGS_print_every);
  const int64_t per_tower = batch / towers;
  for (int64_t step = 1; step <= steps; ++step) {
    auto [bx, by] = data->train.NextBatch(static_cast<int>(per_tower * towers));
    df::FeedDict feeds;
    for (int t = 0; t < towers; ++t) {
      feeds.emplace_back(images[t], bx.Slice(t * per_tower, (t + 1) * per_tower));
      feeds.emplace_back(labels[t], by.Slice(t * per_tower, (t + 1) * per_tower));
    }
    auto out = sess.Run(feeds, {mean_loss}, {*train});
    if (!out.ok()) return Die(absl::StrCat("step ", step), out.status());
    if (step % every == 0 || step == steps) {
      std::printf("Step: %lld, loss (mean of %d towers): %.4f\n", static_cast<long long>(step), towers,
                  (*out)[0].scalar<float>());
      std::fflush(stdout);
    }
  }
  double hits = 0;
  const df::Tensor& ti = data->test.images();
  const df::Tensor& tl = data->test.labels();
  const int64_t n = ti.dim_size(0);
  for (int64_t b = 0; b < n; b += 1000) {
    const int64_t e = std::min(n, b + 1000);
    auto r = sess.Run({{images[0], ti.Slice(b, e)}, {labels[0], tl.Slice(b, e)}}, {accuracy});
    if (!r.ok()) return Die("evaluating", r.status());
    hits += (*r)[0].scalar<float>() * static_cast<double>(e - b);
  }
  const double acc = hits / static_cast<double>(n);
  std::printf("Test-Accuracy: %.4f\n", acc);
  std::fflush(stdout);
  sess.Close().IgnoreError();
  if (external && absl::GetFlag(FLAGS_shutdown_cluster)) {
    absl::Status s = df::ShutdownCluster(*cluster, "in-graph training is over");
    std::printf("Cluster shut down%s\n", s.ok() ? "" : absl::StrCat(" (", s.message(), ")").c_str());
  }
  for (auto& server : local) server->Stop();
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

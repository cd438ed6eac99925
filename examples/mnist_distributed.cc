// Between-graph replicated training on Fashion-MNIST, the book's distributed
// example: one client per worker task builds the same graph, variables go to
// the ps tasks through ReplicaDeviceSetter, and every worker runs Adam steps
// asynchronously against the shared parameters until the global step reaches
// --steps. The chief (worker 0) initialises the model; the others wait until
// it is ready. At the end the chief reports the test accuracy and, once every
// worker is done, shuts the whole cluster down, so parameter servers exit by
// themselves.
//
// With --start_server a worker runs its own task's server in this process,
// as the seeds' workers do (`server = tf.train.Server(...)`, then a session
// on `server.target`); the session then reaches its master without the
// network. Without it, the worker task is a separate distflow-server:
//
//   distflow-server --cluster_spec=$SPEC --job_name=ps --task_index=0 &
//   mnist_distributed --cluster_spec=$SPEC --task_index=0 --start_server &
//   mnist_distributed --cluster_spec=$SPEC --task_index=1 --start_server
//
//   (or: distflow-server ... --job_name=worker --task_index=0 & ... and
//    mnist_distributed --cluster_spec=$SPEC --task_index=0 without the flag)
#include <cstdio>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "data/mnist.h"
#include "distflow/distflow.h"
#include "train/layers.h"
#include "train/optimizer.h"
#include "train/replica_device_setter.h"

ABSL_FLAG(std::string, cluster_spec, "", "the cluster, as for distflow-server");
ABSL_FLAG(int, task_index, 0, "this client's worker task (0 is the chief)");
ABSL_FLAG(std::string, model, "cnn", "cnn (the book's network) or softmax");
ABSL_FLAG(int, steps, 1000, "stop when the global step reaches this");
ABSL_FLAG(int, batch_size, 50, "examples per step");
ABSL_FLAG(double, learning_rate, 1e-3, "Adam learning rate");
ABSL_FLAG(std::string, data_dir, distflow::data::kDefaultFashionMnistDir, "directory of the IDX files");
ABSL_FLAG(int, print_every, 100, "print when the global step crosses a multiple of this");
ABSL_FLAG(double, min_accuracy, 0.0, "the chief exits 3 if test accuracy ends below this");
ABSL_FLAG(bool, start_server, false,
          "run this worker task's server in this process (no distflow-server for it), as the seeds do");
ABSL_FLAG(bool, shutdown_cluster, true, "the chief stops every task when all workers are done");

namespace df = distflow;

namespace {

df::Output Network(const df::Scope& s, const df::Output& images, const std::string& model) {
  if (model == "softmax") return df::layers::fully_connected(s, images, 10, df::layers::kNoActivation, "logits");
  auto x = df::ops::Reshape(s, images, {-1, 28, 28, 1});
  auto net = df::layers::conv2d(s, x, 32, {5, 5}, 1, "SAME", df::layers::kRelu, "conv1");
  net = df::layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool1");
  net = df::layers::conv2d(s, net, 64, {5, 5}, 1, "SAME", df::layers::kRelu, "conv2");
  net = df::layers::max_pool2d(s, net, {2, 2}, 2, "VALID", "pool2");
  net = df::layers::flatten(s, net, "flatten");
  net = df::layers::fully_connected(s, net, 500, df::layers::kRelu, "fully_connected");
  return df::layers::fully_connected(s, net, 10, df::layers::kNoActivation, "pred");
}

int Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int task = absl::GetFlag(FLAGS_task_index);
  const bool chief = task == 0;
  absl::StatusOr<df::ClusterSpec> cluster = df::ClusterSpec::Parse(absl::GetFlag(FLAGS_cluster_spec));
  if (!cluster.ok()) return Die("bad --cluster_spec", cluster.status());
  absl::StatusOr<std::string> address = cluster->task_address("worker", task);
  if (!address.ok()) return Die("bad --task_index", address.status());
  const int num_workers = cluster->num_tasks("worker");
  auto data = df::data::ReadDataSets(absl::GetFlag(FLAGS_data_dir), 5000, 100 + static_cast<uint64_t>(task));
  if (!data.ok()) return Die("reading data", data.status());

  df::Scope root = df::Scope::NewRootScope();
  const std::string worker_device = absl::StrCat("/job:worker/task:", task);
  df::Scope s = root.WithDeviceFunction(df::ReplicaDeviceSetter(*cluster, worker_device));
  auto global_step = df::CreateGlobalStep(s);
  df::ops::VariableOptions counter_options;
  counter_options.trainable = false;
  auto done_workers = df::ops::MakeVariable(s.WithOpName("done_workers"), df::ops::Const(s, int64_t{0}), counter_options);
  auto images = df::ops::Placeholder(s.WithOpName("x-input"), df::DT_FLOAT, {-1, 784});
  auto labels = df::ops::Placeholder(s.WithOpName("y-input"), df::DT_INT32, {-1});
  auto logits = Network(s, images, absl::GetFlag(FLAGS_model));
  auto xent = df::ops::Raw(s, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  auto loss = df::ops::Mean(s, df::Output(xent, 0, s), {0});
  df::AdamOptimizer adam(absl::GetFlag(FLAGS_learning_rate));
  auto train = adam.Minimize(root, loss, &global_step);
  if (!train.ok()) return Die("building the optimizer", train.status());
  auto correct = df::ops::Equal(s, df::ops::ArgMax(s, logits, 1), df::ops::Cast(s, labels, df::DT_INT64));
  auto accuracy = df::ops::Mean(s, df::ops::Cast(s, correct, df::DT_FLOAT), {0});
  auto ready = df::ops::IsVariableInitialized(s, global_step);
  auto finished = df::ops::AssignAdd(s, done_workers, df::ops::Const(s, int64_t{1}));
  auto init = df::ops::GlobalVariablesInitializer(root);
  if (!root.ok()) return Die("building the graph", root.status());

  std::unique_ptr<df::Server> server;
  std::string target = absl::StrCat("grpc://", *address);
  if (absl::GetFlag(FLAGS_start_server)) {
    absl::StatusOr<std::unique_ptr<df::Server>> created = df::Server::Create(*cluster, "worker", task);
    if (!created.ok()) return Die("creating this task's server", created.status());
    if (absl::Status st = (*created)->Start(); !st.ok()) return Die("starting this task's server", st);
    server = std::move(*created);
    target = server->target();
  }
  df::SessionOptions options;
  options.wait_for_cluster_ms = 120000;
  // This worker's steps touch only the ps tasks and its own task: do not
  // wait for the other workers (TensorFlow's device_filters idiom).
  options.device_filters = {"/job:ps", worker_device};
  df::Session sess(target, options);
  if (chief) {
    if (auto r = sess.Run({}, {}, {init}); !r.ok()) return Die("initialising", r.status());
    std::printf("Worker %d (chief): model initialised on the ps tasks\n", task);
  } else {
    // Wait for the chief, as a Supervisor's non-chief workers do.
    for (;;) {
      auto r = sess.Run({ready});
      if (r.ok() && (*r)[0].scalar<bool>()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::printf("Worker %d: model is ready, training\n", task);
  }
  std::fflush(stdout);

  const int64_t steps = absl::GetFlag(FLAGS_steps);
  const int64_t every = absl::GetFlag(FLAGS_print_every);
  int64_t step = 0, local_steps = 0;
  const absl::Time train_start = absl::Now();
  while (step < steps) {
    auto [bx, by] = data->train.NextBatch(absl::GetFlag(FLAGS_batch_size));
    auto out = sess.Run({{images, bx}, {labels, by}}, {loss, accuracy, global_step}, {*train});
    if (!out.ok()) return Die("training step", out.status());
    int64_t now = (*out)[2].scalar<int64_t>();
    ++local_steps;
    if (now / every != step / every) {
      std::printf("Worker : %d, Step: %lld, Loss: %.4f, Accuracy (batch): %.3f\n", task, static_cast<long long>(now),
                  (*out)[0].scalar<float>(), (*out)[1].scalar<float>());
      std::fflush(stdout);
    }
    step = now;
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - train_start);
  std::printf("Worker %d ran %lld of the %lld global steps in %.2f s (%.1f steps/s)\n", task,
              static_cast<long long>(local_steps), static_cast<long long>(step), secs,
              secs > 0 ? static_cast<double>(local_steps) / secs : 0.0);
  if (auto r = sess.Run({finished}); !r.ok()) return Die("reporting completion", r.status());
  if (!chief) return 0;

  // The test set in chunks, averaged.
  double hits = 0;
  const df::Tensor& ti = data->test.images();
  const df::Tensor& tl = data->test.labels();
  const int64_t n = ti.dim_size(0), chunk = 1000;
  for (int64_t b = 0; b < n; b += chunk) {
    int64_t e = std::min(n, b + chunk);
    auto r = sess.Run({{images, ti.Slice(b, e)}, {labels, tl.Slice(b, e)}}, {accuracy});
    if (!r.ok()) return Die("evaluating", r.status());
    hits += (*r)[0].scalar<float>() * static_cast<double>(e - b);
  }
  double acc = hits / static_cast<double>(n);
  std::printf("Test-Accuracy: %.4f\n", acc);
  std::fflush(stdout);

  if (absl::GetFlag(FLAGS_shutdown_cluster)) {
    for (int i = 0; i < 600; ++i) {
      auto r = sess.Run({done_workers});
      if (r.ok() && (*r)[0].scalar<int64_t>() >= num_workers) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    (void)sess.Close();
    absl::Status s = df::ShutdownCluster(*cluster, "training is over");
    std::printf("All %d workers are done; cluster shut down%s\n", num_workers, s.ok() ? "" : " (with errors)");
  }
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

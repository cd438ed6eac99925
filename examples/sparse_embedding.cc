// A CTR-style sparse model on parameter servers, in C++ (its Python twin is
// examples/python/sparse_embedding.py): each example is a bag of feature ids
// drawn from a power law (Zipf, 1.3) over --vocab ids, as clicks and words are, and a
// label; the model is an embedding table of --vocab x --dim rows split into
// one part per ps task ("div": contiguous row ranges), the mean of the
// looked-up rows, a logistic layer, and Adagrad. Each part's initial value
// is made on its ps, each step's ids go to the parts that own them and only
// those rows come back; the gradient is an IndexedSlices that
// SparseApplyAdagrad applies on the ps. The data are generated: id i has a
// hidden weight +1 or -1 (a hash of i) and the label is whether the bag's
// hidden weights sum above zero.
//
//   build/tools/distflow-launch --ps 2 --workers 2 -- build/examples/sparse_embedding
//
// The ps tasks are distflow-servers; the workers train asynchronously until
// the global step reaches --last_step, then the chief waits for the others
// and ends the cluster, so every process exits. --max_final_loss makes the
// chief exit 1 if its mean loss over its last 50 steps ends above it.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "distflow/distflow.h"
#include "distflow/task_config.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/supervisor.h"

ABSL_FLAG(std::string, cluster_spec, "", "the cluster (distflow-launch passes it; else DISTFLOW_CONFIG)");
ABSL_FLAG(std::string, job_name, "", "'ps' or 'worker'");
ABSL_FLAG(std::string, task_index, "", "index of the task in its job");
ABSL_FLAG(int, status_port, -1, "serve /status and /metrics on this port (-1: none)");
ABSL_FLAG(int64_t, vocab, 1000000, "rows of the embedding table");
ABSL_FLAG(int64_t, dim, 64, "columns of the embedding table");
ABSL_FLAG(int64_t, ids_per_example, 8, "feature ids in each example's bag");
ABSL_FLAG(int64_t, batch_size, 64, "examples per step");
ABSL_FLAG(int64_t, last_step, 300, "train until the global step reaches this");
ABSL_FLAG(double, learning_rate, 0.5, "Adagrad's learning rate");
ABSL_FLAG(double, max_final_loss, 0,
          "the chief exits 1 if its mean loss over its last 50 steps is above this (0: no check)");
ABSL_FLAG(int, wait_for_workers_secs, 120, "how long the chief waits for the other workers to finish");

namespace df = distflow;

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "sparse_embedding: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

double HiddenWeight(int64_t id) {
  return ((static_cast<uint64_t>(id) * 2654435761u) % (uint64_t{1} << 32)) % 2 == 0 ? 1.0 : -1.0;
}

// A draw from the Zipf distribution P(k) ~ k^-a, k >= 1 (Devroye's
// rejection method, as numpy.random.zipf): id k - 1 is about k^-1.3 as
// frequent as id 0, as clicks and words are.
int64_t Zipf(std::mt19937_64& rng, double a) {
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const double am1 = a - 1.0, b = std::pow(2.0, am1);
  while (true) {
    const double u = 1.0 - uniform(rng), v = uniform(rng);
    const double x = std::floor(std::pow(u, -1.0 / am1));
    if (x < 1.0 || x > 9.0e18) continue;
    const double t = std::pow(1.0 + 1.0 / x, am1);
    if (v * x * (t - 1.0) / (b - 1.0) <= t / b) return static_cast<int64_t>(x);
  }
}

// A batch of bags of ids and their labels.
void MakeBatch(std::mt19937_64& rng, df::Tensor* ids, df::Tensor* labels) {
  const int64_t batch = absl::GetFlag(FLAGS_batch_size), per = absl::GetFlag(FLAGS_ids_per_example);
  const int64_t vocab = absl::GetFlag(FLAGS_vocab);
  *ids = df::Tensor(df::DT_INT64, df::TensorShape({batch, per}));
  *labels = df::Tensor(df::DT_FLOAT, df::TensorShape({batch, 1}));
  int64_t* id = ids->flat<int64_t>().data();
  float* label = labels->flat<float>().data();
  for (int64_t b = 0; b < batch; ++b) {
    double sum = 0;
    for (int64_t k = 0; k < per; ++k) {
      id[b * per + k] = std::min(Zipf(rng, 1.3) - 1, vocab - 1);
      sum += HiddenWeight(id[b * per + k]);
    }
    label[b] = sum > 0 ? 1.0f : 0.0f;
  }
}

int RunWorker(const df::TaskConfig& task) {
  const df::ClusterSpec& cluster = task.cluster;
  df::ServerOptions server_options;
  server_options.status_port = absl::GetFlag(FLAGS_status_port);
  auto server = df::Server::Create(cluster, "worker", task.task_index, server_options);
  if (!server.ok()) return Fail("creating the worker's server", server.status());
  if (absl::Status st = (*server)->Start(); !st.ok()) return Fail("starting the worker's server", st);

  const int num_ps = static_cast<int>(cluster.task_indices("ps").size());
  const int num_workers = static_cast<int>(cluster.task_indices("worker").size());
  const int64_t vocab = absl::GetFlag(FLAGS_vocab), dim = absl::GetFlag(FLAGS_dim);
  const std::string worker_device = absl::StrCat("/job:worker/task:", task.task_index);
  df::Scope root = df::Scope::NewRootScope();
  df::Scope s = root.WithDevice(worker_device);
  df::Scope ps0 = root.WithDevice("/job:ps/task:0");

  // The table in one part per ps task, "div": the first (vocab % n) parts
  // one row longer. Each part's random initial value is made on its ps.
  std::vector<df::Output> parts;
  for (int p = 0; p < num_ps; ++p) {
    const int64_t rows = vocab / num_ps + (p < vocab % num_ps ? 1 : 0);
    df::Scope on_ps = root.WithDevice(absl::StrCat("/job:ps/task:", p));
    df::Output initial =
        df::ops::RandomUniform(on_ps, {rows, dim}) * df::ops::Const(on_ps, 0.1f) - df::ops::Const(on_ps, 0.05f);
    parts.push_back(df::ops::MakeVariable(on_ps.WithOpName(absl::StrCat("embedding/part_", p)), initial));
  }
  df::Tensor zero_w(df::DT_FLOAT, df::TensorShape({dim, 1})), zero_b(df::DT_FLOAT, df::TensorShape({1}));
  std::fill_n(zero_w.flat<float>().data(), dim, 0.0f);
  zero_b.flat<float>().data()[0] = 0.0f;
  df::Output w = df::ops::MakeVariable(ps0.WithOpName("logistic/weights"), df::ops::Const(ps0, zero_w));
  df::Output b = df::ops::MakeVariable(ps0.WithOpName("logistic/bias"), df::ops::Const(ps0, zero_b));
  df::Output global_step = df::CreateGlobalStep(ps0);
  df::ops::VariableOptions counter_options;
  counter_options.trainable = false;
  df::Output done_workers =
      df::ops::MakeVariable(ps0.WithOpName("done_workers"), df::ops::Const(ps0, int64_t{0}), counter_options);

  df::Output ids = df::ops::Placeholder(s.WithOpName("ids"), df::DT_INT64, df::PartialShape({-1, -1}));
  df::Output labels = df::ops::Placeholder(s.WithOpName("labels"), df::DT_FLOAT, df::PartialShape({-1, 1}));
  df::Output rows = df::ops::EmbeddingLookup(s, parts, ids, "div");
  df::Output bag = df::ops::Mean(s, rows, {1});
  df::Output logits = df::ops::Add(s, df::ops::MatMul(s, bag, w), b);
  // Sigmoid cross-entropy: softplus(x) - z * x.
  df::Output softplus = df::Output(df::ops::Raw(s, "Softplus", {logits}), 0, s);
  df::Output loss = df::ops::Mean(s, df::ops::Sub(s, softplus, df::ops::Mul(s, labels, logits)), {0, 1});
  df::AdagradOptimizer adagrad(absl::GetFlag(FLAGS_learning_rate));
  absl::StatusOr<df::Operation> train = adagrad.Minimize(root, loss, &global_step);
  if (!train.ok()) return Fail("building the optimizer", train.status());
  df::Output finished = df::ops::AssignAdd(s, done_workers, df::ops::Const(s, int64_t{1}));
  if (!root.ok()) return Fail("building the graph", root.status());

  const bool chief = task.task_index == 0;
  df::SupervisorOptions sv;
  sv.is_chief = chief;
  sv.global_step = global_step;
  sv.save_checkpoint_secs = 0;
  sv.coordination_vars = {done_workers};
  sv.session_options.wait_for_cluster_ms = 120000;
  sv.session_options.device_filters = {"/job:ps", worker_device};
  std::vector<std::unique_ptr<df::SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<df::StopAtStepHook>(absl::GetFlag(FLAGS_last_step)));
  auto session = df::MonitoredSession::Create(root, (*server)->target(), sv, std::move(hooks));
  if (!session.ok()) return Fail("creating the session", session.status());
  df::MonitoredSession& sess = **session;

  std::mt19937_64 rng(1000 + task.task_index);
  std::vector<double> losses;
  const absl::Time start = absl::Now();
  while (!sess.ShouldStop()) {
    df::Tensor x, y;
    MakeBatch(rng, &x, &y);
    auto r = sess.Run({{ids, x}, {labels, y}}, {loss, global_step}, {*train});
    if (!r.ok()) return Fail("training", r.status());
    losses.push_back((*r)[0].scalar<float>());
    if (chief && losses.size() % 50 == 0) {
      std::printf("step %" PRId64 " loss %.4f\n", (*r)[1].scalar<int64_t>(), losses.back());
      std::fflush(stdout);
    }
  }
  double recent = 0;
  const size_t n = std::min<size_t>(50, losses.size());
  for (size_t i = losses.size() - n; i < losses.size(); ++i) recent += losses[i];
  recent = n > 0 ? recent / static_cast<double>(n) : NAN;
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("Worker %d: %zu steps in %.1f s (%.1f steps/s), final mean loss %.4f\n", task.task_index, losses.size(),
              secs, secs > 0 ? static_cast<double>(losses.size()) / secs : 0.0, recent);
  std::fflush(stdout);
  df::Session* raw = sess.raw_session();
  if (auto r = raw->Run({finished}); !r.ok()) return Fail("reporting completion", r.status());
  if (!chief) return sess.Close().ok() ? 0 : 1;

  // The chief ends the cluster once every worker is done, so the ps exit.
  int64_t done = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_wait_for_workers_secs));
  while (absl::Now() < deadline) {
    auto r = raw->Run({done_workers});
    if (r.ok()) done = (*r)[0].scalar<int64_t>();
    if (done >= num_workers) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  (void)sess.Close();
  absl::Status shut = df::ShutdownCluster(cluster, "training is over");
  std::printf("%" PRId64 " of %d workers done; cluster shut down%s\n", done, num_workers,
              shut.ok() ? "" : " (with errors)");
  const double bound = absl::GetFlag(FLAGS_max_final_loss);
  if (bound > 0 && !(recent <= bound)) {
    std::fprintf(stderr, "sparse_embedding: the final mean loss %.4f is above --max_final_loss=%.4f\n", recent, bound);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  df::TaskConfigFlags flags;
  flags.cluster_spec = absl::GetFlag(FLAGS_cluster_spec);
  flags.job_name = absl::GetFlag(FLAGS_job_name);
  flags.task_index = absl::GetFlag(FLAGS_task_index);
  absl::StatusOr<df::TaskConfig> task = df::ResolveTaskConfig(flags, df::ProcessEnvironment());
  if (!task.ok()) {
    std::fprintf(stderr, "sparse_embedding: %s\n", std::string(task.status().message()).c_str());
    return 2;
  }
  if (!task->cluster.HasJob("ps") || task->cluster.task_indices("ps").empty()) {
    std::fprintf(stderr, "sparse_embedding: the cluster has no ps job; the table lives on the ps tasks\n");
    return 2;
  }
  if (task->job == "ps") {
    // Without distflow-launch (which runs distflow-server for the ps), a ps
    // of this program serves until the chief ends the cluster.
    df::ServerOptions options;
    options.status_port = absl::GetFlag(FLAGS_status_port);
    auto server = df::Server::Create(task->cluster, "ps", task->task_index, options);
    if (!server.ok()) return Fail("creating the ps server", server.status());
    if (absl::Status st = (*server)->Start(); !st.ok()) return Fail("starting the ps server", st);
    (*server)->Join();
    return 0;
  }
  if (task->job != "worker") {
    std::fprintf(stderr, "sparse_embedding: job '%s' is neither 'ps' nor 'worker'\n", task->job.c_str());
    return 2;
  }
  return RunWorker(*task);
}

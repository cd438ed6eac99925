// --all_reduce training of the book's distributed example (see
// mnist_distributed.cc): no ps tasks; every worker holds a replica of the
// model and averages its gradients with the others' by collective all-reduce.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "distflow/train/collective_all_reduce_optimizer.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/supervisor.h"
#include "mnist_distributed_common.h"
#include "mnist_distributed_flags.h"

namespace df = distflow;

namespace mnist_distributed {
namespace {

// A CollectiveReduce of 1 from every worker: returns once every worker
// has started it, so every worker has finished what came before.
df::Output Barrier(const df::Scope& s, int num_workers, int64_t instance) {
  return df::Output(df::ops::Raw(s, "CollectiveReduce", {df::ops::Const(s, int32_t{1})},
                                 {{"group_size", num_workers},
                                  {"group_key", 2},
                                  {"instance_key", instance},
                                  {"merge_op", "Add"},
                                  {"final_op", "Id"}}),
                    0, s);
}

// FNV-1a over the bytes of every trainable variable: equal on every worker
// if the replicas are identical.
uint64_t Checksum(const std::vector<df::Tensor>& values) {
  uint64_t h = 1469598103934665603ull;
  for (const df::Tensor& t : values) {
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (size_t i = 0; i < t.TotalBytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  return h;
}

}  // namespace

// --all_reduce: this worker's replica of the model on its own task; each
// step's gradients are averaged across the workers (the ring for the large
// ones), and the variables start as worker 0's (a broadcast after each
// worker initialised its own). Every worker runs the same steps in lockstep;
// at the end two barriers make sure no worker's exit breaks another's last
// collective: the chief evaluates and shuts the cluster down, the others
// serve until it does.
int RunAllReduce(const df::ClusterSpec& cluster, int task, df::data::DataSets& data, WorkerServer worker_server) {
  const bool chief = task == 0;
  const int num_workers = cluster.num_tasks("worker");
  const std::string worker_device = absl::StrCat("/job:worker/task:", task);
  df::Scope root = df::Scope::NewRootScope();
  df::Scope s = root.WithDevice(worker_device);
  auto global_step = df::CreateGlobalStep(s);
  auto images = df::ops::Placeholder(s.WithOpName("x-input"), df::DT_FLOAT, {-1, 784});
  auto labels = df::ops::Placeholder(s.WithOpName("y-input"), df::DT_INT32, {-1});
  auto logits = Network(s, images, absl::GetFlag(FLAGS_model));
  auto xent = df::ops::Raw(s, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  auto loss = df::ops::Mean(s, df::Output(xent, 0, s), {0});
  df::CollectiveAllReduceOptions o;
  o.num_replicas = num_workers;
  o.rank = task;
  auto opt = df::CollectiveAllReduceOptimizer::Create(
      std::make_unique<df::AdamOptimizer>(absl::GetFlag(FLAGS_learning_rate)), o);
  if (!opt.ok()) return Die("building the optimizer", opt.status());
  auto train = (*opt)->Minimize(s, loss, &global_step);
  if (!train.ok()) return Die("building the optimizer", train.status());
  auto broadcast = (*opt)->BroadcastVariables(s);
  if (!broadcast.ok()) return Die("building the broadcast", broadcast.status());
  auto correct = df::ops::Equal(s, df::ops::ArgMax(s, logits, 1), df::ops::Cast(s, labels, df::DT_INT64));
  auto accuracy = df::ops::Mean(s, df::ops::Cast(s, correct, df::DT_FLOAT), {0});
  auto trained = Barrier(s, num_workers, 1), all_seen = Barrier(s, num_workers, 2);
  const std::vector<df::Output> variables = s.TrainableVariables();
  if (!root.ok()) return Die("building the graph", root.status());

  std::unique_ptr<df::Server> server = std::move(worker_server.server);
  const std::string target = worker_server.target;
  df::SupervisorOptions sv;
  sv.is_chief = true;  // every worker initialises its own replica
  sv.logdir = chief ? absl::GetFlag(FLAGS_logdir) : "";
  sv.global_step = global_step;
  sv.save_checkpoint_steps = absl::GetFlag(FLAGS_save_checkpoint_steps);
  sv.save_checkpoint_secs = 0;
  sv.local_init_op = *broadcast;  // then every replica holds worker 0's values
  sv.session_options.wait_for_cluster_ms = 120000;
  // Wait for every worker (not just this one), so that the broadcast finds
  // its peers up; the steps still run on this task alone.
  sv.session_options.device_filters = {"/job:worker"};
  sv.recovery_timeout = absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout_secs));
  const int64_t train_steps = absl::GetFlag(FLAGS_train_steps);
  std::vector<std::unique_ptr<df::SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<df::StopAtStepHook>(train_steps));
  auto session = df::MonitoredSession::Create(root, target, sv, std::move(hooks));
  if (!session.ok()) return Die("creating the session", session.status());
  df::MonitoredSession& sess = **session;
  std::printf("Worker %d%s: model is ready, training with all-reduce across %d workers\n", task,
              chief ? " (chief)" : "", num_workers);
  std::fflush(stdout);
  const int64_t every = absl::GetFlag(FLAGS_print_every);
  int64_t step = sess.global_step();
  const absl::Time start = absl::Now();
  while (!sess.ShouldStop()) {
    auto [bx, by] = data.train.NextBatch(absl::GetFlag(FLAGS_batch_size));
    auto out = sess.Run({{images, bx}, {labels, by}}, {accuracy}, {*train});
    if (!out.ok()) return Die("training step", out.status());
    const int64_t now = sess.global_step();
    if (now / every != step / every) {
      std::printf("Worker : %d, Step: %lld, Accuracy (batch): %.3f\n", task, static_cast<long long>(now),
                  (*out)[0].scalar<float>());
      std::fflush(stdout);
    }
    step = now;
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  df::Session* raw = sess.raw_session();
  auto values = raw->Run(variables);
  if (!values.ok()) return Die("reading the variables", values.status());
  std::printf("Worker %d ran %lld steps in %.2f s; variables checksum %016llx\n", task, static_cast<long long>(step),
              secs, static_cast<unsigned long long>(Checksum(*values)));
  std::fflush(stdout);
  double acc = 0;
  if (chief) {
    absl::StatusOr<double> tested = TestAccuracy(raw, images, labels, accuracy, data.test);
    if (!tested.ok()) return Die("evaluating", tested.status());
    acc = *tested;
    std::printf("Test-Accuracy: %.4f\n", acc);
    std::fflush(stdout);
  }
  if (auto r = raw->Run({trained}); !r.ok()) return Die("waiting for the other workers", r.status());
  if (!chief) {
    // The chief may still read this worker's part of the last barrier; a
    // shutdown that interrupts it is the normal end.
    if (auto r = raw->Run({all_seen}); !r.ok())
      std::printf("Worker %d: last barrier: %s\n", task, r.status().ToString().c_str());
    (void)sess.Close();
    if (server != nullptr) server->Join();
    return 0;
  }
  if (auto r = raw->Run({all_seen}); !r.ok()) return Die("waiting for the other workers", r.status());
  if (absl::Status st = sess.Close(); !st.ok())
    std::fprintf(stderr, "closing the session: %s\n", st.ToString().c_str());
  if (absl::GetFlag(FLAGS_shutdown_cluster)) {
    absl::Status st = df::ShutdownCluster(cluster, "training is over");
    std::printf("All %d workers are done; cluster shut down%s\n", num_workers, st.ok() ? "" : " (with errors)");
  }
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

}  // namespace mnist_distributed

// The book's distributed example (between-graph replication on Fashion-MNIST),
// as the book runs it: the same program is started once per task.
//
//   mnist_distributed --job_name=ps --task_index=0 &
//   mnist_distributed --job_name=worker --task_index=0 &   # the chief
//   mnist_distributed --job_name=worker --task_index=1 &
//   mnist_distributed --job_name=worker --task_index=2
//
// The cluster defaults to the book's (ps on localhost:2222, workers on
// localhost:2223-2225); --ps_hosts/--worker_hosts (comma-separated),
// --cluster_spec or DISTFLOW_CONFIG name another. Under srun or mpirun,
// --job_layout=ps:1,worker:3 derives the task from the rank instead of
// --job_name/--task_index (rank 0 is the ps, ranks 1..3 the workers).
// A ps task serves its variables and exits once the chief shuts the cluster
// down (the book's `server.join()` returns). A worker runs its task's server
// in this process, builds the model with its
// variables on the ps tasks (ReplicaDeviceSetter), and trains through a
// MonitoredSession: the chief initialises the model or restores the newest
// checkpoint of --logdir, saves checkpoints every --save_checkpoint_steps,
// and recovers if a task fails; the others wait until the model is ready.
// Steps are asynchronous Adam updates until the global step reaches
// --train_steps; with --sync_replicas they are synchronous: each global step
// averages the gradients of --replicas_to_aggregate workers (default: all of
// them; fewer makes the slowest workers backups). The chief then prints the test accuracy and, once every
// worker is done (or --wait_for_workers_secs passed), shuts the cluster down.
//
// Data: a worker starts its server first (the cluster is up before any data
// is read), then reads only its shard of Fashion-MNIST's 55,000 training
// examples: with W workers in the cluster spec, worker k takes examples k,
// k + W, k + 2W, ... (tf.data's shard(W, k)), about 55,000/W of them, and
// walks them in an order reshuffled every epoch. Only the chief reads the
// test set, for its evaluation.
//
// With a ps and failure detection the shards follow the live workers: a
// worker takes shard k of W, W the workers the coordinator (ps 0) holds
// in the job (alive, or not heard from yet; not dead, not left) and k its
// position among them by task index, when it starts and again every
// --reshard_every_steps (50) steps of its own, re-reading its new shard when
// k or W changed. Once every worker has checked since the last join or
// leave, the shards are disjoint and cover the training set; until then
// (at most --reshard_every_steps local steps per worker) two may overlap
// or some examples wait, and a dead worker's examples are taken over once
// the coordinator declares it dead. --all_reduce keeps the spec's shard
// (its group is fixed).
//
// --join=PS0_HOST:PORT --join_as=HOST:PORT starts a worker that is not in
// the cluster spec and joins the running job (asynchronous, or synchronous
// started with --sync_replicas --elastic): the job's
// coordinator (ps 0) gives it a task index and the cluster, and it trains
// until the global step reaches --train_steps, or for --local_steps of its
// own, then leaves. Nobody is restarted; the chief waits for the workers
// that joined before it ends the cluster. With --sync_replicas --elastic the
// chief aggregates as many gradients per step as there are workers in the
// job (less the backups of --replicas_to_aggregate), as the coordinator
// counts them: a joined worker is waited for from the next step, one that
// left or was declared dead is not. DISTFLOW_JOIN and DISTFLOW_JOIN_AS in
// the environment (what distflow-launch --min_workers/--max_workers gives
// its joiners) do the same as the two flags, which win when given.
//
// --all_reduce trains without ps tasks (start only workers, e.g.
// `distflow-launch --ps 0 --workers 3 -- mnist_distributed --all_reduce`):
// every worker holds a replica of the variables on its own task, starts
// from worker 0's values, and averages its gradients with the others' by
// collective all-reduce each step (CollectiveAllReduceOptimizer).
//
// SIGTERM (what Kubernetes, SLURM and distflow-launch send on scale-down)
// stops a worker of ps training cleanly: it finishes its current step,
// counts itself done and leaves the job (the coordinator records it as left,
// not dead; in elastic synchronous training the chief stops waiting for it),
// and exits 0. The chief on SIGTERM asks every worker to stop after its
// step, waits for them as at the end of training (up to half of
// --stop_grace_secs), saves a checkpoint if --logdir is set, ends the
// cluster and exits 0, without the test evaluation. A ps on SIGTERM asks
// the job to stop the same way (it sets the job's stop flag, a variable on
// the first ps task that every worker reads after its step): the workers
// leave after their step, the chief saves a checkpoint if --logdir is set
// and ends the cluster, and the ps exits 0 once ended (in synchronous
// training a worker whose step started before the flag was set may then
// end with a failed step). A task that has not
// stopped --stop_grace_secs after the SIGTERM (its step waits for a task
// that is gone) exits 1 saying so; a second SIGTERM kills at once.
//
// --start_server=false drives a worker task served by a separate
// distflow-server process instead. --trace_step=N writes a timeline of one
// step (every task's nodes, transfers linked) as Chrome trace-event JSON.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "distflow/data/mnist.h"
#include "distflow/distflow.h"
#include "distflow/elastic.h"
#include "distflow/task_config.h"
#include "distflow/train/defer_updates.h"
#include "distflow/train/optimizer.h"
#include "distflow/train/prefetch.h"
#include "distflow/train/progress_hook.h"
#include "distflow/train/replica_device_setter.h"
#include "distflow/train/supervisor.h"
#include "distflow/train/sync_replicas_optimizer.h"
#include "mnist_distributed_common.h"
#include "mnist_distributed_flags.h"
#include "mnist_distributed_stop.h"

ABSL_FLAG(int, local_steps, 0, "leave after this many steps of this worker (0: train until --train_steps)");
ABSL_FLAG(int, reshard_every_steps, 50,
          "with a ps and failure detection: every this many steps of its own, a worker asks the coordinator for the "
          "live workers and takes its shard among them (0: the spec's shard, never changed)");
ABSL_FLAG(bool, start_fresh_if_incompatible, false,
          "if --logdir holds checkpoints of another model, start afresh instead of failing");
ABSL_FLAG(bool, sync_replicas, false, "synchronous training: average the workers' gradients for each global step");
ABSL_FLAG(int, replicas_to_aggregate, 0,
          "with --sync_replicas: gradients averaged per step (default: the number of workers; fewer: backup workers)");
ABSL_FLAG(bool, elastic, false,
          "with --sync_replicas: the gradients per step follow the workers in the job (joins, leaves, deaths, as "
          "the coordinator on ps 0 sees them) instead of staying --replicas_to_aggregate");
ABSL_FLAG(bool, prefetch_variables, false,
          "asynchronous training: a worker reads the variables of its next step while it computes the current "
          "one, so each step computes on weights one step older (distflow/train/prefetch.h); off (the default: "
          "on an idle machine it bought no speed and cost accuracy early in training): every step reads afresh. "
          "Never with --sync_replicas");
ABSL_FLAG(bool, defer_updates, false,
          "asynchronous training: a worker's step ends once the ps has its gradients, and the ps applies them while "
          "the worker starts its next step, so a step may read weights without the worker's previous update "
          "(distflow/train/defer_updates.h); off: a step ends after its updates. Never with --sync_replicas");
ABSL_FLAG(int, sync_step_timeout_secs, 120, "with --sync_replicas: how long a worker waits for its step to be applied");
ABSL_FLAG(bool, all_reduce, false,
          "synchronous training without ps tasks: every worker holds the variables and averages its gradients "
          "with the others' by collective all-reduce each step (start only workers: distflow-launch --ps 0)");
ABSL_FLAG(bool, progress, true,
          "the chief shows a progress line: redrawn in place on a terminal, every 10 s otherwise");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate (chain) of this task: with --tls_key, every connection is TLS");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate: peers must present certificates it signed (mutual TLS), and servers too");
ABSL_FLAG(std::string, auth_token_file, "",
          "file holding the cluster's secret token (else DISTFLOW_AUTH_TOKEN); every task and client needs the same");
ABSL_FLAG(int64_t, trace_step, -1,
          "trace the first step this worker runs once the global step reaches this, on every task it touches, "
          "and write it as Chrome trace-event JSON (open it in Perfetto or chrome://tracing)");
ABSL_FLAG(std::string, trace_file, "",
          "where --trace_step writes; {task} becomes the worker's index (default: "
          "trace_step_N_worker_{task}.json in --logdir or .)");
ABSL_FLAG(int, wait_for_workers_secs, 120,
          "how long the chief waits for the other workers before shutting down (workers declared dead are not "
          "waited for)");

namespace df = distflow;
using mnist_distributed::Die;
using mnist_distributed::JoinedWorkersStillIn;
using mnist_distributed::JoinRunningJob;
using mnist_distributed::kStopFlagName;
using mnist_distributed::LiveShard;
using mnist_distributed::Network;
using mnist_distributed::ReadShard;
using mnist_distributed::ReadWorkerShard;
using mnist_distributed::ResolveTask;
using mnist_distributed::RunAllReduce;
using mnist_distributed::RunPs;
using mnist_distributed::SigtermReceived;
using mnist_distributed::StartWorkerServer;
using mnist_distributed::StopCleanlyOnSigterm;
using mnist_distributed::StopFlagDevice;
using mnist_distributed::TestAccuracy;
using mnist_distributed::Usage;
using mnist_distributed::WorkerServer;

namespace {

// Ps training (asynchronous, or --sync_replicas): this worker's variables
// on the ps tasks, its steps through a MonitoredSession; the chief evaluates
// and ends the cluster. Returns the process's exit code.
int RunPsWorker(const df::ClusterSpec& spec, int task, const std::string& address, bool joining) {
  const df::ClusterSpec* cluster = &spec;
  const bool chief = task == 0;
  const int num_workers = cluster->num_tasks("worker");
  const bool sync = absl::GetFlag(FLAGS_sync_replicas);
  int to_aggregate = absl::GetFlag(FLAGS_replicas_to_aggregate);
  if (to_aggregate != 0 && !sync) return Usage("--replicas_to_aggregate needs --sync_replicas");
  if (sync && absl::GetFlag(FLAGS_defer_updates)) {
    return Usage(
        "--defer_updates is for asynchronous training: a synchronous step must end after its average is applied. "
        "Drop --defer_updates or --sync_replicas");
  }
  // A worker that joins a synchronous job takes part elastically (its
  // replica id, its task index, is past the spec's workers).
  const bool elastic_sync = sync && (absl::GetFlag(FLAGS_elastic) || joining);
  if (elastic_sync && (!cluster->HasJob("ps") || absl::GetFlag(FLAGS_heartbeat_timeout_secs) <= 0)) {
    return Usage(
        "--elastic needs the membership kept by the coordinator on ps 0: a ps job and --heartbeat_timeout_secs above "
        "0");
  }
  if (to_aggregate == 0) to_aggregate = num_workers;
  if (to_aggregate < 1 || to_aggregate > num_workers) {
    return Usage(absl::StrCat("--replicas_to_aggregate=", to_aggregate, " but the cluster has ", num_workers,
                              " workers: a step could never collect enough gradients; use 1 to ", num_workers));
  }
  // The server first, so the cluster is up (and a joined worker heartbeats)
  // while this worker reads its shard and builds its graph.
  absl::StatusOr<WorkerServer> started = StartWorkerServer(*cluster, task, address);
  if (!started.ok()) return Die("starting this task's server", started.status());
  std::unique_ptr<df::Server> server = std::move(started->server);
  const std::string target = started->target;
  // The shard follows the live workers (see the top): at the start, and
  // every --reshard_every_steps local steps.
  const std::string membership = cluster->HasJob("ps") && absl::GetFlag(FLAGS_heartbeat_timeout_secs) > 0 &&
                                         absl::GetFlag(FLAGS_reshard_every_steps) > 0
                                     ? cluster->task_address("ps", cluster->task_indices("ps").front()).value_or("")
                                     : "";
  std::pair<int, int> shard = {task % std::max(1, num_workers), std::max(1, num_workers)};
  if (!membership.empty()) {
    if (absl::StatusOr<std::pair<int, int>> live = LiveShard(membership, task); live.ok()) shard = *live;
  }
  auto data = ReadShard(shard.first, shard.second, task, chief);
  if (!data.ok()) return Die("reading data", data.status());
  if (!membership.empty()) {
    std::printf("Worker %d: training on shard %d of %d (%lld examples)\n", task, shard.first, shard.second,
                static_cast<long long>(data->train.num_examples()));
    std::fflush(stdout);
  }

  df::Scope root = df::Scope::NewRootScope();
  const std::string worker_device = absl::StrCat("/job:worker/task:", task);
  df::Scope s = root.WithDeviceFunction(df::ReplicaDeviceSetter(*cluster, worker_device));
  auto global_step = df::CreateGlobalStep(s);
  df::ops::VariableOptions counter_options;
  counter_options.trainable = false;
  auto done_workers =
      df::ops::MakeVariable(s.WithOpName("done_workers"), df::ops::Const(s, int64_t{0}), counter_options);
  // Set by a chief or a ps told to stop (SIGTERM): every worker leaves after its step. On the first ps, where a ps
  // told to stop finds it.
  const df::Scope flag_scope = root.WithDevice(StopFlagDevice(*cluster));
  auto stop_workers = df::ops::MakeVariable(flag_scope.WithOpName(kStopFlagName),
                                            df::ops::Const(flag_scope, int64_t{0}), counter_options);
  auto images = df::ops::Placeholder(s.WithOpName("x-input"), df::DT_FLOAT, {-1, 784});
  auto labels = df::ops::Placeholder(s.WithOpName("y-input"), df::DT_INT32, {-1});
  auto logits = Network(s, images, absl::GetFlag(FLAGS_model));
  auto xent = df::ops::Raw(s, "SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
  auto loss = df::ops::Mean(s, df::Output(xent, 0, s), {0});
  auto adam = std::make_unique<df::AdamOptimizer>(absl::GetFlag(FLAGS_learning_rate));
  adam->SetFusedDenseUpdates(absl::GetFlag(FLAGS_fused_adam));
  std::unique_ptr<df::SyncReplicasOptimizer> sync_opt;
  absl::StatusOr<df::Operation> train;
  if (sync) {
    df::SyncReplicasOptions o;
    o.replicas_to_aggregate = to_aggregate;
    o.total_num_replicas = num_workers;
    o.replica_id = task;
    o.step_timeout = absl::Seconds(absl::GetFlag(FLAGS_sync_step_timeout_secs));
    if (elastic_sync) {
      const std::string coordinator = cluster->task_address("ps", cluster->task_indices("ps").front()).value_or("");
      o.live_replicas = df::LiveWorkerCounter(coordinator);
    }
    auto created = df::SyncReplicasOptimizer::Create(std::move(adam), o);
    if (!created.ok()) return Die("building the optimizer", created.status());
    sync_opt = std::move(*created);
    train = sync_opt->Minimize(root, loss, &global_step);
  } else {
    train = adam->Minimize(root, loss, &global_step);
  }
  if (!train.ok()) return Die("building the optimizer", train.status());
  // What a training step runs: with prefetching, a NoOp after `train` that
  // lets this worker read the next step's variables during this one.
  const bool prefetch = !sync && absl::GetFlag(FLAGS_prefetch_variables);
  // With deferred updates, a NoOp after `train` that lets the ps apply this
  // step's gradients after answering it.
  const bool defer = absl::GetFlag(FLAGS_defer_updates);
  df::Operation step_op = defer ? df::DeferVariableUpdates(s, *train) : *train;
  if (prefetch) step_op = df::PrefetchVariableReads(s, step_op);
  auto correct = df::ops::Equal(s, df::ops::ArgMax(s, logits, 1), df::ops::Cast(s, labels, df::DT_INT64));
  auto accuracy = df::ops::Mean(s, df::ops::Cast(s, correct, df::DT_FLOAT), {0});
  auto finished = df::ops::AssignAdd(s, done_workers, df::ops::Const(s, int64_t{1}));
  auto ask_workers_to_stop = df::ops::Assign(s, stop_workers, df::ops::Const(s, int64_t{1}));
  // Read after the step (in synchronous training, after its barrier), so a worker sees a stop set while it
  // waited. On the flag's task in async steps that end after their updates (no token from them crosses to this
  // worker: one call fewer a step); here when deferring, so that the ps can answer before its updates.
  const df::Scope stop_scope = !sync && !defer ? flag_scope : s;
  auto stop_seen = df::ops::Identity(stop_scope.WithControlDependencies({*train}), stop_workers);
  if (!root.ok()) return Die("building the graph", root.status());

  df::SupervisorOptions sv;
  sv.is_chief = chief;
  sv.logdir = absl::GetFlag(FLAGS_logdir);
  sv.global_step = global_step;
  sv.save_checkpoint_steps = absl::GetFlag(FLAGS_save_checkpoint_steps);
  sv.start_fresh_if_incompatible = absl::GetFlag(FLAGS_start_fresh_if_incompatible);
  sv.save_checkpoint_secs = 0;
  sv.coordination_vars = {done_workers, stop_workers};
  sv.session_options.wait_for_cluster_ms = 120000;
  sv.recovery_timeout = absl::Seconds(absl::GetFlag(FLAGS_recovery_timeout_secs));
  // This worker's steps touch only the ps tasks and its own task: do not
  // wait for the other workers (TensorFlow's device_filters idiom).
  sv.session_options.device_filters = {"/job:ps", worker_device};
  const int64_t train_steps = absl::GetFlag(FLAGS_train_steps);
  std::vector<std::unique_ptr<df::SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<df::StopAtStepHook>(train_steps));
  if (sync_opt) hooks.push_back(sync_opt->MakeSessionRunHook(chief));
  if (chief) {
    // For the status page's curves and /metrics.
    hooks.push_back(std::make_unique<df::ScalarSummaryHook>(
        std::vector<std::pair<std::string, df::Output>>{{"loss", loss}, {"accuracy", accuracy}}));
  }
  df::ProgressHook* progress = nullptr;  // owned by the session's hooks
  if (chief && absl::GetFlag(FLAGS_progress)) {
    df::ProgressOptions p;
    p.last_step = train_steps;
    p.examples_per_step = static_cast<int64_t>(absl::GetFlag(FLAGS_batch_size)) * (sync ? to_aggregate : 1);
    p.loss = loss;
    auto hook = std::make_unique<df::ProgressHook>(p);
    progress = hook.get();
    hooks.push_back(std::move(hook));
  }
  // From here a SIGTERM lets the current step finish (see the top).
  StopCleanlyOnSigterm(absl::GetFlag(FLAGS_stop_grace_secs));
  auto session = df::MonitoredSession::Create(root, target, sv, std::move(hooks));
  if (!session.ok()) return Die("creating the session", session.status());
  df::MonitoredSession& sess = **session;
  if (chief && !sess.restored_from().empty()) {
    std::printf("Worker %d (chief): restored %s at global step %lld\n", task, sess.restored_from().c_str(),
                static_cast<long long>(sess.global_step()));
  } else {
    std::printf("Worker %d%s: model is ready, training %s\n", task, chief ? " (chief)" : "",
                sync ? absl::StrCat("synchronously (", to_aggregate, " of ", num_workers, " workers per step)").c_str()
                     : absl::StrCat("asynchronously", prefetch ? ", prefetching its variables" : "",
                                    defer ? ", deferring its updates" : "")
                           .c_str());
  }
  std::fflush(stdout);

  const int64_t every = absl::GetFlag(FLAGS_print_every);
  const int64_t max_local_steps = absl::GetFlag(FLAGS_local_steps);
  int64_t step = sess.global_step(), local_steps = 0;
  const absl::Time train_start = absl::Now();
  const int64_t trace_step = absl::GetFlag(FLAGS_trace_step);
  bool traced = trace_step < 0;
  bool stop_asked = false;  // the stop flag was set: by the chief, or by a ps told to stop
  while (!sess.ShouldStop() && (max_local_steps == 0 || local_steps < max_local_steps) && !SigtermReceived() &&
         !stop_asked) {
    auto [bx, by] = data->train.NextBatch(absl::GetFlag(FLAGS_batch_size));
    df::StepStats trace;
    df::RunOptions ro;
    const bool tracing = !traced && step >= trace_step;
    if (tracing) ro.trace = &trace;
    auto out = sess.Run({{images, bx}, {labels, by}}, {accuracy, stop_seen}, {step_op}, ro);
    if (!out.ok()) return Die("training step", out.status());
    stop_asked = (*out)[1].scalar<int64_t>() != 0;
    if (tracing) {
      traced = true;
      std::string file = absl::GetFlag(FLAGS_trace_file);
      if (file.empty()) {
        const std::string dir = absl::GetFlag(FLAGS_logdir).empty() ? "." : absl::GetFlag(FLAGS_logdir);
        file = absl::StrCat(dir, "/trace_step_", step, "_worker_{task}.json");
      }
      file = absl::StrReplaceAll(file, {{"{task}", absl::StrCat(task)}});
      std::ofstream f(file, std::ios::binary | std::ios::trunc);
      f << df::ChromeTraceJson(trace);
      f.close();
      if (!f) return Die("writing the trace", absl::UnavailableError(absl::StrCat("cannot write ", file)));
      if (progress != nullptr) progress->ClearLine();
      std::printf("Worker %d: traced global step %lld (%lld nodes on %zu devices) to %s\n", task,
                  static_cast<long long>(step), static_cast<long long>(trace.num_nodes()), trace.devices.size(),
                  file.c_str());
      std::fflush(stdout);
    }
    int64_t now = sess.global_step();
    ++local_steps;
    if (!membership.empty() && local_steps % absl::GetFlag(FLAGS_reshard_every_steps) == 0) {
      absl::StatusOr<std::pair<int, int>> live = LiveShard(membership, task);
      if (live.ok() && *live != shard) {
        absl::StatusOr<df::data::DataSets> next = ReadShard(live->first, live->second, task, false);
        if (next.ok()) {
          shard = *live;
          data->train = std::move(next->train);
          if (progress != nullptr) progress->ClearLine();
          std::printf(
              "Worker %d: the job has %d live workers; training on shard %d of %d (%lld examples) from "
              "global step %lld\n",
              task, shard.second, shard.first, shard.second, static_cast<long long>(data->train.num_examples()),
              static_cast<long long>(now));
          std::fflush(stdout);
        }
      }
    }
    if (now / every != step / every) {
      if (progress != nullptr) progress->ClearLine();
      std::printf("Worker : %d, Step: %lld, Accuracy (batch): %.3f\n", task, static_cast<long long>(now),
                  (*out)[0].scalar<float>());
      std::fflush(stdout);
    }
    step = now;
  }
  if (progress != nullptr) progress->Finish();
  const bool told_to_stop = SigtermReceived();
  const bool stopping = told_to_stop || stop_asked;
  if (stopping) {
    std::printf("Worker %d: %s; leaving the job after global step %lld\n", task,
                told_to_stop ? "SIGTERM" : "the job was asked to stop", static_cast<long long>(step));
    std::fflush(stdout);
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - train_start);
  std::printf("Worker %d ran %lld of the %lld global steps in %.2f s (%.1f steps/s)%s\n", task,
              static_cast<long long>(local_steps), static_cast<long long>(step), secs,
              secs > 0 ? static_cast<double>(local_steps) / secs : 0.0,
              sess.recoveries() > 0 ? absl::StrCat(", recovered ", sess.recoveries(), " times").c_str() : "");
  df::Session* raw = sess.raw_session();
  if (auto r = raw->Run({finished}); !r.ok()) return Die("reporting completion", r.status());
  if (!chief) return sess.Close().ok() ? 0 : 1;
  if (told_to_stop && !stop_asked) {
    // The others leave after their step. In synchronous training a worker
    // may already wait in its next step for the chief's gradient, so the
    // chief contributes a few more steps, each bounded, through the
    // monitored session (its SyncReplicas hook feeds the step its token and
    // the gradients to aggregate); one that times out is needed by nobody.
    if (auto r = raw->Run({ask_workers_to_stop}); !r.ok()) return Die("asking the workers to stop", r.status());
    for (int extra = 0; sync && extra < 3; ++extra) {
      auto [bx, by] = data->train.NextBatch(absl::GetFlag(FLAGS_batch_size));
      df::RunOptions bounded;
      bounded.timeout_ms = 5000;
      if (auto r = sess.Run({{images, bx}, {labels, by}}, {}, {*train}, bounded); !r.ok()) break;
    }
  }

  // The test set (not when told to stop: be quick).
  double acc = 0;
  if (!stopping) {
    absl::StatusOr<double> tested = TestAccuracy(raw, images, labels, accuracy, data->test);
    if (!tested.ok()) return Die("evaluating", tested.status());
    acc = *tested;
    std::printf("Test-Accuracy: %.4f\n", acc);
  }
  std::fflush(stdout);

  if (absl::GetFlag(FLAGS_shutdown_cluster)) {
    // Workers that joined the running job are waited for too (the
    // coordinator knows them); without failure detection there are none.
    const bool elastic = absl::GetFlag(FLAGS_heartbeat_timeout_secs) > 0 && cluster->HasJob("ps");
    const std::string coordinator =
        elastic ? cluster->task_address("ps", cluster->task_indices("ps").front()).value_or("") : std::string();
    int joined_total = 0;
    std::vector<std::string> joined_in;
    int64_t done = 0;
    // Told to stop, the chief keeps half its grace for the checkpoint and the shutdown.
    const int wait_secs = stopping ? std::min(absl::GetFlag(FLAGS_wait_for_workers_secs),
                                              std::max(1, absl::GetFlag(FLAGS_stop_grace_secs) / 2))
                                   : absl::GetFlag(FLAGS_wait_for_workers_secs);
    const absl::Time deadline = absl::Now() + absl::Seconds(wait_secs);
    std::vector<std::string> dead;  // workers declared dead: not waited for
    while (absl::Now() < deadline) {
      auto r = raw->Run({done_workers});
      if (r.ok()) done = (*r)[0].scalar<int64_t>();
      dead.clear();
      if (server != nullptr) {
        for (const std::string& t : server->DeadTasks())
          if (absl::StartsWith(t, "/job:worker/")) dead.push_back(t);
      }
      joined_in = coordinator.empty() ? std::vector<std::string>{} : JoinedWorkersStillIn(coordinator, &joined_total);
      // Every worker, joined ones too, reported done or was declared dead.
      if (done + static_cast<int64_t>(dead.size()) >= num_workers + joined_total && joined_in.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (stopping && !sv.logdir.empty()) {
      absl::StatusOr<std::string> saved = sess.SaveCheckpoint();
      if (!saved.ok()) return Die("saving a checkpoint on SIGTERM", saved.status());
      std::printf("Worker 0 (chief): %s: saved %s at global step %lld\n",
                  told_to_stop ? "SIGTERM" : "the job was asked to stop", saved->c_str(),
                  static_cast<long long>(sess.global_step()));
    }
    if (joined_total > 0) {
      std::printf("%d worker(s) joined the running job%s\n", joined_total,
                  joined_in.empty() ? "; all of them have left"
                                    : absl::StrCat("; still in it: ", absl::StrJoin(joined_in, ", ")).c_str());
    }
    if (absl::Status st = sess.Close(); !st.ok())
      std::fprintf(stderr, "closing the session: %s\n", st.ToString().c_str());
    absl::Status s = df::ShutdownCluster(*cluster, told_to_stop ? "the chief was told to stop (SIGTERM)"
                                                   : stop_asked ? "a ps task was told to stop (SIGTERM)"
                                                                : "training is over");
    const int all_workers = num_workers + joined_total;
    if (done >= all_workers) {
      std::printf("All %d workers are done; cluster shut down%s\n", all_workers, s.ok() ? "" : " (with errors)");
    } else if (!dead.empty()) {
      std::printf("%lld of %d workers reported done; %s declared dead; cluster shut down%s\n",
                  static_cast<long long>(done), all_workers, absl::StrJoin(dead, ", ").c_str(),
                  s.ok() ? "" : " (with errors)");
    } else {
      std::printf("%lld of %d workers reported done within %d s; cluster shut down%s\n", static_cast<long long>(done),
                  all_workers, wait_secs, s.ok() ? "" : " (with errors)");
    }
  } else if (absl::Status st = sess.Close(); !st.ok()) {
    std::fprintf(stderr, "closing the session: %s\n", st.ToString().c_str());
  }
  if (sync_opt) {  // after Close, which stopped the chief's update thread
    std::printf("Synchronous training: %lld steps applied, %lld stale gradients dropped\n",
                static_cast<long long>(sync_opt->stats().steps_applied.load()),
                static_cast<long long>(sync_opt->stats().stale_gradients_dropped.load()));
    if (elastic_sync && chief) {
      std::printf("Elastic: the gradients per step changed %lld times; the last step aggregated %lld\n",
                  static_cast<long long>(sync_opt->stats().aggregation_changes.load()),
                  static_cast<long long>(sync_opt->stats().replicas_aggregated.load()));
    }
  }
  if (stopping) return 0;  // stopped on request: no test accuracy to judge
  return acc >= absl::GetFlag(FLAGS_min_accuracy) ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists the flags of this file (absl matches files to the binary's
  // name, which has a dash where the file has an underscore).
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "mnist_distributed");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "the book's distributed example on Fashion-MNIST; run once per task: --job_name=ps|worker --task_index=N");
  absl::ParseCommandLine(argc, argv);
  auto ps_or_worker = [](const std::string& from, const std::string& job) {
    return Usage(absl::StrCat(from, " is '", job, "'; use ps or worker"));
  };
  if (const std::string flag = absl::GetFlag(FLAGS_job_name); !flag.empty() && flag != "ps" && flag != "worker") {
    return ps_or_worker("--job_name", flag);
  }
  if (absl::Status st = df::SetUpClusterToken(absl::GetFlag(FLAGS_auth_token_file)); !st.ok()) {
    return Usage(std::string(st.message()));
  }
  if (absl::Status st =
          df::SetUpTls({absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)});
      !st.ok()) {
    return Usage(std::string(st.message()));
  }
  if (absl::GetFlag(FLAGS_recovery_timeout_secs) <= 0) {
    return Usage(
        absl::StrCat("--recovery_timeout_secs must be positive, not ", absl::GetFlag(FLAGS_recovery_timeout_secs)));
  }
  // distflow-launch tells a joiner in its environment (flags given by hand win).
  if (const char* env = std::getenv("DISTFLOW_JOIN"); env != nullptr && absl::GetFlag(FLAGS_join).empty()) {
    absl::SetFlag(&FLAGS_join, std::string(env));
    const char* as = std::getenv("DISTFLOW_JOIN_AS");
    if (as != nullptr && absl::GetFlag(FLAGS_join_as).empty()) absl::SetFlag(&FLAGS_join_as, std::string(as));
  }
  const bool joining = !absl::GetFlag(FLAGS_join).empty();
  if (!joining && !absl::GetFlag(FLAGS_join_as).empty()) return Usage("--join_as needs --join");
  if (absl::GetFlag(FLAGS_local_steps) < 0) {
    return Usage(absl::StrCat("--local_steps must be 0 or more, not ", absl::GetFlag(FLAGS_local_steps)));
  }
  if (absl::GetFlag(FLAGS_stop_grace_secs) < 1) {
    return Usage(absl::StrCat("--stop_grace_secs must be at least 1, not ", absl::GetFlag(FLAGS_stop_grace_secs)));
  }
  if (absl::GetFlag(FLAGS_elastic) && !absl::GetFlag(FLAGS_sync_replicas)) {
    return Usage("--elastic makes synchronous training follow the membership; add --sync_replicas");
  }
  absl::StatusOr<df::TaskConfig> config = joining ? JoinRunningJob() : ResolveTask();
  if (!config.ok()) {
    if (joining && !absl::IsInvalidArgument(config.status())) return Die("joining the job", config.status());
    return Usage(std::string(config.status().message()));
  }
  const std::string job = config->job;
  const int task = config->task_index;
  if (job != "ps" && job != "worker") return ps_or_worker("the job", job);
  const df::ClusterSpec* cluster = &config->cluster;
  absl::StatusOr<std::string> address = cluster->task_address(job, task);
  if (!address.ok()) return Usage(absl::StrCat("bad task: ", address.status().message()));
  if (!config->placed_by.empty()) {
    std::printf("This is /job:%s/task:%d (placed by %s)\n", job.c_str(), task, config->placed_by.c_str());
  }

  if (job == "ps" && absl::GetFlag(FLAGS_all_reduce)) {
    return Usage("--all_reduce trains without ps tasks: start only workers (distflow-launch --ps 0 --workers N)");
  }
  if (job == "ps") return RunPs(*cluster, task, *address);

  if (absl::GetFlag(FLAGS_all_reduce)) {
    if (absl::GetFlag(FLAGS_sync_replicas)) {
      return Usage("--all_reduce and --sync_replicas are two kinds of synchronous training; pick one");
    }
    if (joining) return Usage("--join works with asynchronous ps training only: an all-reduce group is fixed at start");
    // The server first: the others' cluster-up does not wait for this worker's data.
    absl::StatusOr<WorkerServer> server = StartWorkerServer(*cluster, task, *address);
    if (!server.ok()) return Die("starting this task's server", server.status());
    auto data = ReadWorkerShard(task, cluster->num_tasks("worker"), task == 0);
    if (!data.ok()) return Die("reading data", data.status());
    return RunAllReduce(*cluster, task, *data, std::move(*server));
  }
  return RunPsWorker(*cluster, task, *address, joining);
}

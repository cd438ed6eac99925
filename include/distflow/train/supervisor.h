// Supervisor and MonitoredSession: the session a training program runs
// steps on, with the model initialised or restored, checkpoints saved, and
// recovery when a task of the cluster fails (TensorFlow's tf.train.Supervisor
// and MonitoredTrainingSession).
//
//   SupervisorOptions opts;
//   opts.is_chief = task_index == 0;
//   opts.logdir = "train_logs";
//   opts.global_step = global_step;
//   opts.save_checkpoint_steps = 500;
//   auto session = MonitoredSession::Create(root, server->target(), opts,
//                                           {std::make_unique<StopAtStepHook>(5000)});
//   while (!(*session)->ShouldStop()) (*session)->Run(feeds, {loss}, {train_op});
//   (*session)->Close();                      // the chief saves a last checkpoint
//
// Creating the session: the chief restores the newest usable checkpoint of
// `logdir` (a damaged one is skipped with a warning; one of another model is
// an error naming the differences) or, if there is none, runs `init_op`; the
// other workers wait until every variable is initialised, logging which are
// not ready yet, and give up after `ready_timeout` with an error naming the
// chief and those variables.
//
// A step that fails because a task went away or restarted (Unavailable,
// Aborted) is not the end: the session is closed and created again as
// above (so the chief restores the last checkpoint if the ps lost the
// variables), and the step is run again, up to `max_recoveries` times in a
// row. Any other error is returned, and so is the Unavailable of a server
// of this process that has stopped ("The server at ... in this process has
// stopped"): neither the wait for the model nor a recovery waits for it.
//
// Not thread-safe: one training loop drives one MonitoredSession.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distflow/export.h"
#include "distflow/scope.h"
#include "distflow/session.h"
#include "distflow/train/event_writer.h"
#include "distflow/train/saver.h"

namespace distflow {

class Env;  // the clock (src/base/env.h)

struct DISTFLOW_EXPORT SupervisorOptions {
  bool is_chief = true;
  // Where checkpoints go; empty: none are saved or restored.
  std::string logdir;
  // The global step variable (CreateGlobalStep); needed for checkpoints and
  // for hooks that count steps.
  Output global_step;
  // Run by the chief when there is no checkpoint; default: the initialiser
  // of every variable but the local ones.
  Operation init_op;
  // Fed to init_op when the chief runs it (TF's init_feed_dict: variables
  // initialised from a placeholder, e.g. pretrained embeddings too large to
  // be a constant in the graph).
  FeedDict init_feed_dict;
  // The chief saves a checkpoint every this many seconds or global steps
  // (0 turns either off), and once at Close.
  int64_t save_checkpoint_secs = 600;
  int64_t save_checkpoint_steps = 0;
  int max_to_keep = 5;
  // When the log directory's checkpoints belong to another model (variables
  // missing, extra, or of another dtype or shape), the chief fails with an
  // error naming them; with this set it warns and initialises instead. The
  // old checkpoints stay until max_to_keep rotates them out.
  bool start_fresh_if_incompatible = false;
  // Variables that coordinate the tasks rather than describe the model (a
  // count of finished workers): checkpoints leave them out, and after a
  // restore the chief initialises those that are not initialised yet.
  std::vector<Output> coordination_vars;
  // Variables of each task alone (TensorFlow's LOCAL_VARIABLES: metrics'
  // totals and counts): never saved or waited for. Those made with
  // VariableOptions::local (ops::LocalVariables) are added to these.
  std::vector<Output> local_variables;
  // Run by every task once the model is ready (initialised or restored by
  // the chief), and again after each recovery: TensorFlow's local_init_op.
  // Default: the initialisers of the local variables (each must have one:
  // made with MakeVariable), as TF's Scaffold's local_variables_initializer.
  Operation local_init_op;
  // Variables that are slices of larger ones (partitioned variables' parts):
  // checkpoints record them as such (SaverOptions::slices), so a model
  // partitioned differently restores them. Slices of variables checkpoints
  // leave out are ignored.
  std::vector<SaveSlice> save_slices;
  // Fed to local_init_op each time it runs (TF's Scaffold local_init_feed_dict).
  FeedDict local_init_feed_dict;
  // How long a non-chief waits for the chief to initialise the model.
  absl::Duration ready_timeout = absl::Minutes(5);
  // Session recreations allowed in a row before a failing step is returned.
  int max_recoveries = 10;
  // How long one recovery may take in all (waiting for the cluster and for
  // the model included) before the error that keeps it failing is returned,
  // saying so: a task that is gone for good ends the program in bounded
  // time instead of max_recoveries waits for the cluster.
  absl::Duration recovery_timeout = absl::Minutes(5);
  // Pause before recreating the session (a restarting task needs a moment).
  absl::Duration recovery_wait = absl::Seconds(1);
  SessionOptions session_options;
  // With a logdir, the chief also writes TensorBoard event files there
  // (train/event_writer.h; the graph first): the value of summary_op (a
  // serialized Summary, e.g. MergeSummary's) every save_summaries_steps
  // global steps or save_summaries_secs, and "global_step/sec" every
  // log_step_count_steps (0 turns each off), as TensorFlow's
  // MonitoredTrainingSession does by default.
  Output summary_op;
  int64_t save_summaries_steps = 100;
  int64_t save_summaries_secs = 0;
  int64_t log_step_count_steps = 100;
  // Where the session reads the time and sleeps (waiting for the chief,
  // between recoveries, checkpoint intervals); null: the real clock. The
  // library's own tests pass a clock that moves only when told to.
  Env* env = nullptr;
};

class MonitoredSession;

// Called around every MonitoredSession::Run.
class DISTFLOW_EXPORT SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  // Once the session exists (and after each recovery).
  virtual absl::Status AfterCreateSession(MonitoredSession* session) { return absl::OkStatus(); }
  // Extra tensors to fetch with this step.
  virtual std::vector<Output> BeforeRun() { return {}; }
  // `global_step` after the step (-1 without a global step) and the values
  // of BeforeRun's tensors.
  virtual absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) {
    return absl::OkStatus();
  }
  // At Close, before the session ends.
  virtual absl::Status End(MonitoredSession* session) { return absl::OkStatus(); }
};

// Requests a stop once the global step reaches `last_step`.
class DISTFLOW_EXPORT StopAtStepHook : public SessionRunHook {
 public:
  explicit StopAtStepHook(int64_t last_step) : last_step_(last_step) {}
  absl::Status AfterCreateSession(MonitoredSession* session) override;
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;

 private:
  int64_t last_step_;
};

// Logs the global step, steps per second and `loss` every `every_steps`
// local steps.
class DISTFLOW_EXPORT LoggingHook : public SessionRunHook {
 public:
  LoggingHook(Output loss, int64_t every_steps) : loss_(std::move(loss)), every_(every_steps) {}
  std::vector<Output> BeforeRun() override { return {loss_}; }
  absl::Status AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) override;

 private:
  Output loss_;
  int64_t every_;
  int64_t local_steps_ = 0;
  int64_t last_step_ = -1;
  absl::Time last_time_ = absl::InfinitePast();
};

class DISTFLOW_EXPORT MonitoredSession {
 public:
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(
      const Scope& scope, const std::string& target, SupervisorOptions options,
      std::vector<std::unique_ptr<SessionRunHook>> hooks = {});
  ~MonitoredSession();

  // One step, as Session::Run; recovers from a failed task as described above.
  // `run_options.trace` traces the step (of a recovered step, the attempt that succeeded).
  absl::StatusOr<std::vector<Tensor>> Run(const FeedDict& feeds, const std::vector<Output>& fetches,
                                          const std::vector<Operation>& targets = {},
                                          const RunOptions& run_options = RunOptions());
  bool ShouldStop() const { return stop_requested_; }
  void RequestStop() { stop_requested_ = true; }
  // Runs the hooks' End (the chief's last checkpoint) and closes the session.
  absl::Status Close();

  // The global step as of the last step or session creation (-1 if unknown).
  int64_t global_step() const { return global_step_; }
  bool is_chief() const { return options_.is_chief; }
  // The session's clock (SupervisorOptions::env, else the process's): hooks
  // read time through it, so a test's fake clock drives them too.
  Env* env() const { return options_.env; }
  // How many times the session was recreated after a failure.
  int recoveries() const { return total_recoveries_; }
  // The checkpoint the chief restored when the session was last created, or "".
  const std::string& restored_from() const { return restored_from_; }
  // Saves a checkpoint now (chief with a logdir only); returns its prefix.
  absl::StatusOr<std::string> SaveCheckpoint();
  Session* raw_session() { return session_.get(); }
  // The chief's event file writer (SupervisorOptions::summary_op), or nullptr.
  EventWriter* summary_writer() const { return summary_writer_.get(); }
  const std::string& target() const { return target_; }
  const SessionOptions& session_options() const { return options_.session_options; }

 private:
  MonitoredSession() = default;
  // Both give up at `deadline` (a recovery's), or at their own timeouts.
  absl::Status CreateSession(absl::Time deadline = absl::InfiniteFuture());
  // Whether a session of this MonitoredSession has run anything on the
  // cluster yet (Create then retries an Unavailable as a recovery would).
  bool reached_cluster_ = false;
  // Every variable is initialised on its task (checked after a recovery).
  bool ModelSurvived();
  absl::Status WaitUntilReady(absl::Time deadline);
  absl::StatusOr<int64_t> ReadGlobalStep();
  absl::Status InitialiseUnsaved();
  // Fills in init_op and local_init_op where the options leave them unset.
  absl::Status DefaultInitOps();
  bool IsLocal(const Node* var) const;
  // The chief's summary hooks and event file, if the options ask for them.
  absl::Status AddSummaryHooks();
  // The global step read after `targets` ran in the same step (an Identity
  // with control dependencies on them), made once per set of targets; for
  // targets that defer their variable updates (defer_updates.h), read
  // without waiting for them.
  Output StepAfter(const std::vector<Operation>& targets);

  Scope scope_ = Scope::NewRootScope();
  std::string target_;
  SupervisorOptions options_;
  std::vector<std::unique_ptr<SessionRunHook>> hooks_;
  std::unique_ptr<Saver> saver_;
  std::shared_ptr<EventWriter> summary_writer_;  // shared with the summary hooks
  std::vector<Output> ready_checks_;             // IsVariableInitialized per variable
  std::vector<std::string> var_names_;
  std::vector<Operation> unsaved_inits_;  // initialisers of variables checkpoints do not hold
  std::vector<Output> unsaved_ready_;     // and their readiness checks
  std::unique_ptr<Session> session_;
  std::map<std::vector<const Node*>, Output> step_after_;
  bool stop_requested_ = false;
  bool closed_ = false;
  int64_t global_step_ = -1;
  int total_recoveries_ = 0;
  std::string restored_from_;
  int64_t last_save_step_ = -1;
  absl::Time last_save_time_ = absl::InfinitePast();
};

}  // namespace distflow

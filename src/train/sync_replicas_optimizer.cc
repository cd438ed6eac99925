#include "distflow/train/sync_replicas_optimizer.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "graph/attr_value.h"

namespace distflow {

namespace {

constexpr char kBarrierName[] = "sync_replicas/step_barrier";

const std::string& DeviceOf(const Output& o) { return o.node()->def().device(); }

std::string AccumulatorName(const Output& var) { return absl::StrCat(var.op().name(), "/grad_accumulator"); }

// Sets the attributes naming an accumulator of `var`.
std::function<void(proto::NodeDef*)> AccumulatorAttrs(const Output& var,
                                                      std::function<void(proto::NodeDef*)> more = nullptr) {
  return [var, more](proto::NodeDef* n) {
    SetAttrType(n, "T", var.dtype());
    SetAttrString(n, "shared_name", AccumulatorName(var));
    if (more) more(n);
  };
}

std::function<void(proto::NodeDef*)> BarrierAttrs(std::function<void(proto::NodeDef*)> more = nullptr) {
  return [more](proto::NodeDef* n) {
    SetAttrString(n, "shared_name", kBarrierName);
    if (more) more(n);
  };
}

bool IsFatal(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return true;
    default:
      return false;
  }
}

}  // namespace

// The chief's hook: initialises the accumulators and the barrier whenever
// the session is (re)created, and applies the steps on a background thread
// with its own Session.
class SyncReplicasChiefHook : public SessionRunHook {
 public:
  explicit SyncReplicasChiefHook(SyncReplicasOptimizer* opt) : opt_(opt) {}
  ~SyncReplicasChiefHook() override { Stop(); }

  absl::Status AfterCreateSession(MonitoredSession* session) override {
    if (!opt_->built_) {
      return absl::FailedPreconditionError(
          "The SyncReplicasOptimizer's hook was made before its ApplyGradients or Minimize: build the train op first");
    }
    absl::StatusOr<std::vector<Tensor>> r = session->raw_session()->Run({}, {}, {opt_->init_});
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("Initialising synchronous training: ", r.status().message()));
    }
    if (!thread_.joinable()) {
      env_ = session->env();
      target_ = session->target();
      session_options_ = session->session_options();
      thread_ = std::thread([this] { Loop(); });
    }
    return absl::OkStatus();
  }

  absl::Status AfterRun(MonitoredSession*, int64_t, const std::vector<Tensor>&) override {
    absl::MutexLock lock(&mu_);
    return error_;
  }

  absl::Status End(MonitoredSession*) override {
    Stop();
    absl::MutexLock lock(&mu_);
    return error_;
  }

 private:
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // Waits up to `d` unless stopping; true if stopping.
  bool Pause(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stop_), d);
    return stop_;
  }

  // The session's clock (MonitoredSession::env()), which the logs' pacing reads.
  absl::Time Now() const { return absl::FromUnixMicros((env_ != nullptr ? env_ : Env::Default())->NowMicros()); }

  bool Stopping() {
    absl::MutexLock lock(&mu_);
    return stop_;
  }

  // After a failed run: false if the thread should end.
  bool OnError(const absl::Status& s, std::unique_ptr<Session>* session) {
    if (Stopping()) return false;
    if (IsFatal(s)) {
      LOG(ERROR) << "Synchronous training cannot apply updates: " << s.message();
      absl::MutexLock lock(&mu_);
      error_ = absl::Status(s.code(), absl::StrCat("Synchronous training cannot apply updates: ", s.message()));
      return false;
    }
    if (Now() - last_error_log_ > absl::Seconds(10)) {
      LOG(WARNING) << "Synchronous training: applying a step failed (" << s.message() << "); retrying";
      last_error_log_ = Now();
    }
    // A task went away or restarted: a new session registers the graph again.
    (*session)->Close().IgnoreError();
    session->reset();
    return !Pause(absl::Seconds(1));
  }

  // The gradients the next step aggregates: the configured count, or with
  // live_replicas the one that follows the workers in the job. Logs and
  // counts each change, naming the global step it applies from.
  int64_t Required(int64_t step) {
    const SyncReplicasOptions& o = opt_->options_;
    if (!o.live_replicas) return o.replicas_to_aggregate;
    absl::StatusOr<int> live = o.live_replicas();
    if (!live.ok()) {
      if (Now() - last_live_error_log_ > absl::Seconds(10)) {
        LOG(WARNING) << "Synchronous training: cannot count the workers in the job (" << live.status().message()
                     << "); aggregating " << (required_ > 0 ? required_ : o.replicas_to_aggregate)
                     << " gradients per step meanwhile";
        last_live_error_log_ = Now();
      }
      return required_ > 0 ? required_ : o.replicas_to_aggregate;
    }
    const int64_t backups = o.total_num_replicas - o.replicas_to_aggregate;
    const int64_t n = std::max<int64_t>(o.min_replicas, *live - backups);
    if (n != required_) {
      if (required_ > 0) opt_->stats_.aggregation_changes.fetch_add(1);
      LOG(INFO) << "Synchronous training: aggregating " << n << " gradients per step"
                << (step >= 0 ? absl::StrCat(" from global step ", step) : std::string()) << " (" << *live
                << " workers in the job"
                << (backups > 0 ? absl::StrCat(", ", backups, " of them backups") : std::string())
                << (*live - backups < o.min_replicas ? absl::StrCat(", min_replicas ", o.min_replicas) : std::string())
                << ")";
      required_ = n;
    }
    return n;
  }

  void Loop() {
    const int64_t num_vars = static_cast<int64_t>(opt_->ready_.size());
    std::vector<Output> wait_fetches = opt_->ready_;
    wait_fetches.push_back(opt_->barrier_step_);
    wait_fetches.push_back(opt_->reported_);
    std::vector<Output> update_fetches = opt_->dropped_;
    update_fetches.push_back(opt_->applied_step_);
    RunOptions run_options;
    run_options.timeout_ms = 60'000;

    std::unique_ptr<Session> session;
    absl::Time last_progress = Now(), last_wait_log = absl::InfinitePast(), last_drop_log = absl::InfinitePast();
    int64_t dropped_total = 0, dropped_logged = 0;
    while (!Stopping()) {
      if (session == nullptr) session = std::make_unique<Session>(target_, session_options_);
      const int64_t required = Required(last_step_);
      FeedDict feeds;
      if (opt_->options_.live_replicas) feeds.emplace_back(opt_->num_required_, Tensor::Scalar<int64_t>(required));
      absl::StatusOr<std::vector<Tensor>> ready = session->Run(feeds, wait_fetches, {}, run_options);
      if (!ready.ok()) {
        if (!OnError(ready.status(), &session)) return;
        continue;
      }
      last_step_ = (*ready)[static_cast<size_t>(num_vars)].scalar<int64_t>();
      bool all = true;
      for (int64_t i = 0; i < num_vars; ++i) all = all && (*ready)[static_cast<size_t>(i)].scalar<bool>();
      if (!all) {
        const absl::Time now = Now();
        if (now - last_progress > absl::Seconds(30) && now - last_wait_log > absl::Seconds(30)) {
          const Tensor& reported = (*ready)[static_cast<size_t>(num_vars) + 1];
          std::vector<int64_t> who(reported.flat<int64_t>().begin(), reported.flat<int64_t>().end());
          LOG(INFO) << "Synchronous training: waiting for the gradients of global step "
                    << (*ready)[static_cast<size_t>(num_vars)].scalar<int64_t>() << " (replicas reported: ["
                    << absl::StrJoin(who, ", ") << "], " << required << " needed)";
          last_wait_log = now;
        }
        continue;
      }
      absl::StatusOr<std::vector<Tensor>> applied = session->Run(feeds, update_fetches, {opt_->update_}, run_options);
      if (!applied.ok()) {
        if (!OnError(applied.status(), &session)) return;
        continue;
      }
      last_progress = Now();
      for (int64_t i = 0; i < num_vars; ++i) dropped_total += (*applied)[static_cast<size_t>(i)].scalar<int64_t>();
      const int64_t step = applied->back().scalar<int64_t>();
      opt_->stats_.steps_applied.fetch_add(1);
      opt_->stats_.replicas_aggregated.store(required);
      last_step_ = step;
      opt_->stats_.stale_gradients_dropped.store(dropped_total / num_vars);
      if (dropped_total != dropped_logged && last_progress - last_drop_log > absl::Seconds(10)) {
        LOG(INFO) << "Synchronous training: global step " << step << ", " << dropped_total / num_vars
                  << " stale gradients dropped so far (computed at an older step)";
        dropped_logged = dropped_total;
        last_drop_log = last_progress;
      }
    }
  }

  SyncReplicasOptimizer* const opt_;
  std::string target_;
  SessionOptions session_options_;
  Env* env_ = nullptr;  // set before the thread starts
  std::thread thread_;
  absl::Time last_error_log_ = absl::InfinitePast();
  // The hook thread's own.
  absl::Time last_live_error_log_ = absl::InfinitePast();
  int64_t required_ = 0;    // the count of the last step (0: none yet)
  int64_t last_step_ = -1;  // the barrier's global step as last seen (-1: not yet)
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<SyncReplicasOptimizer>> SyncReplicasOptimizer::Create(
    std::unique_ptr<Optimizer> optimizer, SyncReplicasOptions options) {
  if (optimizer == nullptr) return absl::InvalidArgumentError("SyncReplicasOptimizer needs an optimizer to wrap");
  if (options.replicas_to_aggregate < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas_to_aggregate must be at least 1, got ", options.replicas_to_aggregate));
  }
  if (options.total_num_replicas == 0) options.total_num_replicas = options.replicas_to_aggregate;
  if (options.total_num_replicas < options.replicas_to_aggregate) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas_to_aggregate (", options.replicas_to_aggregate, ") is larger than total_num_replicas (",
                     options.total_num_replicas,
                     "): no step could ever collect enough gradients. Use at most as many as there are workers."));
  }
  if (options.min_replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat("min_replicas must be at least 1, got ", options.min_replicas));
  }
  if (options.live_replicas && options.replica_id >= 0) {
    // A worker that joined the running job takes part with its task index.
  } else if (options.replica_id < 0 || options.replica_id >= options.total_num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat("replica_id ", options.replica_id, " is not in [0, ",
                                                   options.total_num_replicas,
                                                   "): pass the worker's task index and the number of workers"));
  }
  if (options.step_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("step_timeout must be positive");
  }
  return std::unique_ptr<SyncReplicasOptimizer>(new SyncReplicasOptimizer(std::move(optimizer), options));
}

SyncReplicasOptimizer::~SyncReplicasOptimizer() = default;

absl::StatusOr<Operation> SyncReplicasOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                          const Output* global_step,
                                                          const std::vector<Output>& var_list) {
  ASSIGN_OR_RETURN(Optimizer::GradsAndVars gv, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, gv, global_step);
}

absl::StatusOr<Operation> SyncReplicasOptimizer::ApplyGradients(const Scope& scope,
                                                                const Optimizer::GradsAndVars& grads_and_vars,
                                                                const Output* global_step) {
  if (built_) {
    return absl::FailedPreconditionError(
        "SyncReplicasOptimizer::ApplyGradients was already called; make one SyncReplicasOptimizer per train op");
  }
  if (global_step == nullptr || !global_step->ok()) {
    return absl::InvalidArgumentError("SyncReplicasOptimizer needs the global step (CreateGlobalStep)");
  }
  Optimizer::GradsAndVars pairs;
  for (const auto& [grad, var] : grads_and_vars) {
    if (grad.ok()) pairs.emplace_back(grad, var);
  }
  if (pairs.empty()) return absl::InvalidArgumentError("SyncReplicasOptimizer: no variable has a gradient");
  for (const auto& [grad, var] : pairs) {
    if (!var.ok() || !var.node()->output_is_ref(var.index())) {
      return absl::InvalidArgumentError(absl::StrCat("'", var.name(), "' is not a variable reference"));
    }
    if (var.dtype() != DT_FLOAT && var.dtype() != DT_DOUBLE) {
      return absl::InvalidArgumentError(absl::StrCat("variable '", var.name(), "' has dtype ",
                                                     DataTypeName(var.dtype()),
                                                     "; synchronous training averages float or double gradients"));
    }
  }
  const SyncReplicasOptions& o = options_;
  Scope s = scope.NewSubScope("sync_replicas");
  Scope at_step = s.WithDevice(DeviceOf(*global_step));

  // The worker's step.
  Output local_step =
      Output(ops::Raw(at_step.WithNoControlDependencies(), "SyncBarrierLocalStep", {},
                      BarrierAttrs([&o](proto::NodeDef* n) { SetAttrInt(n, "replica_id", o.replica_id); })),
             0, s);
  // A gradient that is an IndexedSlices (an embedding lookup's) goes to the
  // accumulator as its rows (TF's SparseConditionalAccumulator): only the
  // looked-up rows cross the network, and the chief applies a sparse update.
  auto int64_of = [&s](const Output& x) { return x.dtype() == DT_INT64 ? x : ops::Cast(s, x, DT_INT64); };
  std::vector<bool> sparse;
  std::vector<Operation> pushes;
  for (const auto& [grad, var] : pairs) {
    IndexedSlices slices;
    sparse.push_back(AsIndexedSlices(grad, &slices));
    auto attrs = AccumulatorAttrs(var, [&o](proto::NodeDef* n) { SetAttrInt(n, "replica_id", o.replica_id); });
    if (sparse.back()) {
      pushes.push_back(ops::Raw(s.WithDevice(DeviceOf(var)), "SparseAccumulatorApplyGradient",
                                {local_step, int64_of(slices.indices), slices.values, int64_of(slices.num_rows)},
                                attrs));
    } else {
      pushes.push_back(ops::Raw(s.WithDevice(DeviceOf(var)), "AccumulatorApplyGradient", {local_step, grad}, attrs));
    }
  }
  Operation train = ops::Raw(at_step.WithControlDependencies(pushes), "SyncBarrierWait", {local_step},
                             BarrierAttrs([&o](proto::NodeDef* n) {
                               SetAttrInt(n, "replica_id", o.replica_id);
                               SetAttrInt(n, "replicas_to_aggregate", o.replicas_to_aggregate);
                               SetAttrInt(n, "total_num_replicas", std::max(o.total_num_replicas, o.replica_id + 1));
                               SetAttrInt(n, "timeout_ms", absl::ToInt64Milliseconds(o.step_timeout));
                             }));

  // The chief's update.
  Scope chief = s.WithNoControlDependencies();
  // Elastic: the count comes from the chief's hook with every run (the V2
  // ops take it as an input); the default is the configured one.
  const bool elastic = static_cast<bool>(o.live_replicas);
  if (elastic) {
    Scope at_step_chief = chief.WithDevice(DeviceOf(*global_step));
    num_required_ = ops::PlaceholderWithDefault(
        at_step_chief.WithOpName("num_required"),
        ops::Const(at_step_chief, static_cast<int64_t>(o.replicas_to_aggregate)), PartialShape::Scalar());
  }
  auto required_attrs = [&o, elastic](std::function<void(proto::NodeDef*)> more = nullptr) {
    return [&o, elastic, more](proto::NodeDef* n) {
      if (!elastic) SetAttrInt(n, "num_required", o.replicas_to_aggregate);
      if (more) more(n);
    };
  };
  const std::vector<Output> required_in = elastic ? std::vector<Output>{num_required_} : std::vector<Output>{};
  const char* v2 = elastic ? "V2" : "";
  Optimizer::GradsAndVars averaged;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Output& var = pairs[i].second;
    Scope at_var = chief.WithDevice(DeviceOf(var));
    ready_.emplace_back(
        ops::Raw(at_var, absl::StrCat("AccumulatorWaitReady", v2), required_in,
                 AccumulatorAttrs(var, required_attrs([](proto::NodeDef* n) { SetAttrInt(n, "timeout_ms", 1000); }))),
        0, s);
    auto take_attrs = AccumulatorAttrs(var, required_attrs());
    if (sparse[i]) {
      Operation take = ops::Raw(at_var, absl::StrCat("SparseAccumulatorTakeGradient", v2), required_in, take_attrs);
      averaged.emplace_back(IndexedSlicesGradient(at_var, {Output(take, 1, s), Output(take, 0, s), Output(take, 2, s)}),
                            var);
      dropped_.emplace_back(take, 3, s);
    } else {
      Operation take = ops::Raw(at_var, absl::StrCat("AccumulatorTakeGradient", v2), required_in, take_attrs);
      averaged.emplace_back(Output(take, 0, s), var);
      dropped_.emplace_back(take, 1, s);
    }
  }
  Operation status = ops::Raw(chief.WithDevice(DeviceOf(*global_step)), "SyncBarrierStatus", {}, BarrierAttrs());
  barrier_step_ = Output(status, 0, s);
  reported_ = Output(status, 1, s);
  ASSIGN_OR_RETURN(Operation apply, optimizer_->ApplyGradients(chief, averaged, global_step));
  Scope after = chief.WithDevice(DeviceOf(*global_step)).WithControlDependencies({apply});
  // The barrier counts in int64; TF1 programs often made an int32 global step.
  auto step64 = [&global_step](const Scope& sc) {
    Output id = ops::Identity(sc, *global_step);
    return id.dtype() == DT_INT64 ? id : ops::Cast(sc, id, DT_INT64);
  };
  applied_step_ = step64(after);
  update_ = ops::Raw(chief.WithDevice(DeviceOf(*global_step)), "SyncBarrierRelease", {applied_step_}, BarrierAttrs());

  // The chief's initialisation: accumulators first, then the barrier.
  std::vector<Operation> sets;
  for (const auto& [grad, var] : pairs) {
    Scope at_var = chief.WithDevice(DeviceOf(var));
    sets.push_back(ops::Raw(at_var, "AccumulatorSetGlobalStep", {step64(at_var)}, AccumulatorAttrs(var)));
  }
  Scope init_scope = chief.WithDevice(DeviceOf(*global_step)).WithControlDependencies(sets);
  init_ = ops::Raw(init_scope, "SyncBarrierRelease", {step64(init_scope)}, BarrierAttrs());
  RETURN_IF_ERROR(scope.status());
  built_ = true;
  return train;
}

std::unique_ptr<SessionRunHook> SyncReplicasOptimizer::MakeSessionRunHook(bool is_chief) {
  if (!is_chief) return std::make_unique<SessionRunHook>();
  return std::make_unique<SyncReplicasChiefHook>(this);
}

}  // namespace distflow

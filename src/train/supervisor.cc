#include "distflow/train/supervisor.h"

#include <algorithm>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/env.h"
#include "base/final_status.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "client/graph_state.h"
#include "distflow/ops.h"
#include "distflow/train/summary_hooks.h"
#include "graph/attr_value.h"
#include "placement/deferred_updates.h"

namespace distflow {
namespace {

// A global step's value: TensorFlow programs make it int64, int32 or (the
// book's get_variable with constant_initializer(0)) float32.
absl::StatusOr<int64_t> StepValue(const Tensor& t) {
  if (t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the global step has shape ", t.shape().DebugString(), "; it must be a scalar"));
  }
  switch (t.dtype()) {
    case DT_INT64:
      return t.scalar<int64_t>();
    case DT_INT32:
      return int64_t{t.scalar<int32_t>()};
    case DT_FLOAT:
      return static_cast<int64_t>(t.scalar<float>());
    case DT_DOUBLE:
      return static_cast<int64_t>(t.scalar<double>());
    default:
      return absl::InvalidArgumentError(absl::StrCat("the global step has dtype ", DataTypeName(t.dtype()),
                                                     "; it must be int64, int32, float32 or float64"));
  }
}

// The session's clock (SupervisorOptions::env).
absl::Time NowOf(Env* env) { return absl::FromUnixMicros(env->NowMicros()); }
void SleepOn(Env* env, absl::Duration d) { env->SleepForMicros(absl::ToInt64Microseconds(d)); }

// A task starting, restarting or unreachable for a while; not this
// process's own server that has stopped (a final status): nothing will
// bring it back, so waiting for it would last until ready_timeout or
// recovery_timeout for nothing.
bool Recoverable(const absl::Status& s) { return (absl::IsUnavailable(s) || absl::IsAborted(s)) && !IsFinal(s); }

std::string FirstNames(const std::vector<std::string>& names, size_t n) {
  std::vector<std::string> shown(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min(n, names.size())));
  return absl::StrCat(absl::StrJoin(shown, ", "),
                      names.size() > n ? absl::StrCat(", and ", names.size() - n, " more") : "");
}

}  // namespace

absl::Status StopAtStepHook::AfterCreateSession(MonitoredSession* session) {
  if (session->global_step() >= last_step_) session->RequestStop();
  return absl::OkStatus();
}

absl::Status StopAtStepHook::AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>&) {
  if (global_step >= last_step_) session->RequestStop();
  return absl::OkStatus();
}

absl::Status LoggingHook::AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) {
  ++local_steps_;
  if (every_ <= 0 || local_steps_ % every_ != 0) return absl::OkStatus();
  absl::Time now = NowOf(session->env());
  std::string rate;
  if (last_step_ >= 0 && now > last_time_) {
    rate = absl::StrFormat(", %.1f global steps/s",
                           static_cast<double>(global_step - last_step_) / absl::ToDoubleSeconds(now - last_time_));
  }
  double loss = values.empty() ? 0
                               : (values[0].dtype() == DT_DOUBLE ? values[0].scalar<double>()
                                                                 : static_cast<double>(values[0].scalar<float>()));
  LOG(INFO) << "global step " << global_step << ", loss " << loss << rate;
  last_step_ = global_step;
  last_time_ = now;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    const Scope& scope, const std::string& target, SupervisorOptions options,
    std::vector<std::unique_ptr<SessionRunHook>> hooks) {
  auto s = std::unique_ptr<MonitoredSession>(new MonitoredSession);
  s->scope_ = scope;
  s->target_ = target;
  s->options_ = options;
  if (s->options_.env == nullptr) s->options_.env = Env::Default();
  s->hooks_ = std::move(hooks);
  // The local variables: those listed and those made local (VariableOptions::local).
  for (const Output& v : s->options_.local_variables) {
    if (!v.ok()) return absl::InvalidArgumentError("SupervisorOptions::local_variables holds an invalid Output");
  }
  for (const Output& v : ops::LocalVariables(scope)) {
    const bool listed = std::any_of(s->options_.local_variables.begin(), s->options_.local_variables.end(),
                                    [&](const Output& l) { return l.node() == v.node(); });
    if (!listed) s->options_.local_variables.push_back(v);
  }
  RETURN_IF_ERROR(s->DefaultInitOps());
  std::vector<Output> vars, saved;
  {
    absl::MutexLock lock(&scope.graph_state()->mu);
    for (const auto& n : scope.graph_state()->graph.nodes()) {
      if (n->op() == "Variable") vars.emplace_back(Operation(n.get(), scope.graph_state()), 0, scope);
    }
  }
  auto is_coordination = [&](const Output& v) {
    for (const Output& c : options.coordination_vars) {
      if (c.node() == v.node()) return true;
    }
    return false;
  };
  auto is_local = [&](const Output& v) { return s->IsLocal(v.node()); };
  std::erase_if(vars, is_local);
  for (const Output& v : vars) {
    if (!is_coordination(v)) saved.push_back(v);
  }
  if (!options.logdir.empty()) {
    if (!options.global_step.ok()) {
      return absl::InvalidArgumentError("SupervisorOptions: a logdir needs a global_step (CreateGlobalStep)");
    }
    SaverOptions so;
    so.max_to_keep = options.max_to_keep;
    so.var_list = saved;
    for (const SaveSlice& slice : options.save_slices) {
      const bool is_saved = std::any_of(saved.begin(), saved.end(), [&](const Output& v) {
        return slice.variable.ok() && v.node() == slice.variable.node();
      });
      if (is_saved) so.slices.push_back(slice);
    }
    ASSIGN_OR_RETURN(s->saver_, Saver::Create(scope, so));
  }
  // One readiness check per variable, placed beside it; the initialisers
  // (Assigns) of the variables checkpoints leave out.
  Scope ready = scope.WithNoControlDependencies().NewSubScope("ready");
  std::vector<Operation> inits = scope.Initializers();
  for (const Output& v : vars) {
    s->ready_checks_.push_back(ops::IsVariableInitialized(ready, v));
    s->var_names_.push_back(v.node()->name());
    if (s->saver_ == nullptr || !is_coordination(v)) continue;
    for (const Operation& init : inits) {
      if (init.node()->num_inputs() > 0 && init.node()->input(0).node == v.node()) {
        s->unsaved_inits_.push_back(init);
        s->unsaved_ready_.push_back(s->ready_checks_.back());
      }
    }
  }
  RETURN_IF_ERROR(scope.status());
  RETURN_IF_ERROR(s->AddSummaryHooks());
  // A task that restarts while the session is made (its graphs gone, so
  // Aborted) or a peer that stops answering meanwhile (Unavailable, not
  // final) is met as a step's recovery meets it: the session is made again
  // within recovery_timeout of the first failure. Other errors end here.
  // An Unavailable before the cluster ever answered is the cluster not
  // coming up within wait_for_cluster_ms: that wait was the user's limit.
  absl::Status created = s->CreateSession();
  if (absl::IsAborted(created) || (Recoverable(created) && s->reached_cluster_)) {
    const absl::Time give_up = NowOf(s->options_.env) + s->options_.recovery_timeout;
    while (Recoverable(created) && NowOf(s->options_.env) < give_up) {
      LOG(WARNING) << "Creating the session failed (" << created.message() << "); creating it again";
      SleepOn(s->options_.env, s->options_.recovery_wait);
      created = s->CreateSession(give_up);
    }
    if (!created.ok() && NowOf(s->options_.env) >= give_up) {
      return absl::Status(
          created.code(),
          absl::StrCat("Gave up creating the session after ", absl::FormatDuration(s->options_.recovery_timeout),
                       " (SupervisorOptions::recovery_timeout); the last attempt: ", created.message()));
    }
  }
  RETURN_IF_ERROR(created);
  return s;
}

bool MonitoredSession::IsLocal(const Node* var) const {
  return std::any_of(options_.local_variables.begin(), options_.local_variables.end(),
                     [&](const Output& l) { return l.node() == var; });
}

// TF's Scaffold defaults: init_op initialises every variable but the local
// ones, which local_init_op initialises on every task (chief or not, after
// each recovery too), so a non-chief's metric counters start at zero
// instead of failing its first step as uninitialised.
absl::Status MonitoredSession::DefaultInitOps() {
  if (options_.init_op.ok() && options_.local_init_op.ok()) return absl::OkStatus();
  std::vector<Operation> global_inits, local_inits;
  std::vector<const Node*> initialised;
  for (const Operation& init : scope_.Initializers()) {
    const Node* target = init.node()->num_inputs() > 0 ? init.node()->input(0).node : nullptr;
    if (IsLocal(target)) {
      local_inits.push_back(init);
      initialised.push_back(target);
    } else {
      global_inits.push_back(init);
    }
  }
  const Scope top = scope_.WithNoControlDependencies();
  if (!options_.init_op.ok())
    options_.init_op = ops::Group(top.WithFullOpName(top.GetUniqueName("init")), global_inits);
  if (options_.local_init_op.ok() || options_.local_variables.empty()) return absl::OkStatus();
  for (const Output& v : options_.local_variables) {
    if (std::find(initialised.begin(), initialised.end(), v.node()) == initialised.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SupervisorOptions: the local variable '", v.node()->name(),
                       "' has no initializer (it was made with ops::Variable, not ops::MakeVariable), so the default "
                       "local_init_op cannot initialise it on every task; make it with MakeVariable or set "
                       "SupervisorOptions::local_init_op"));
    }
  }
  options_.local_init_op = ops::Group(top.WithFullOpName(top.GetUniqueName("local_init")), local_inits);
  return absl::OkStatus();
}

absl::Status MonitoredSession::AddSummaryHooks() {
  const SupervisorOptions& o = options_;
  const bool summaries = o.summary_op.ok() && (o.save_summaries_steps > 0 || o.save_summaries_secs > 0);
  const bool speed = o.global_step.ok() && o.log_step_count_steps > 0;
  if (!o.is_chief || o.logdir.empty() || !(summaries || speed)) return absl::OkStatus();
  EventWriterOptions writer_options;
  writer_options.env = o.env;  // the session's clock stamps the events its hooks write
  ASSIGN_OR_RETURN(std::unique_ptr<EventWriter> writer, EventWriter::Open(o.logdir, writer_options));
  summary_writer_ = std::move(writer);
  RETURN_IF_ERROR(summary_writer_->WriteGraph(scope_));
  if (summaries) {
    hooks_.push_back(std::make_unique<SummarySaverHook>(summary_writer_, o.summary_op, o.save_summaries_steps,
                                                        absl::Seconds(o.save_summaries_secs)));
  }
  if (speed) hooks_.push_back(std::make_unique<StepCounterHook>(summary_writer_, o.log_step_count_steps));
  return absl::OkStatus();
}

MonitoredSession::~MonitoredSession() {
  if (!closed_ && session_ != nullptr) (void)session_->Close();
}

absl::StatusOr<int64_t> MonitoredSession::ReadGlobalStep() {
  if (!options_.global_step.ok()) return -1;
  ASSIGN_OR_RETURN(std::vector<Tensor> v, session_->Run({options_.global_step}));
  return StepValue(v[0]);
}

namespace {

// True if `targets` run DeferVariableUpdates' marker (directly or through
// the NoOps that group them).
bool DefersUpdates(const std::vector<Operation>& targets) {
  std::vector<const Node*> stack;
  for (const Operation& t : targets) stack.push_back(t.node());
  absl::flat_hash_set<const Node*> seen;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n == nullptr || !seen.insert(n).second || n->op() != "NoOp") continue;
    absl::StatusOr<bool> on = GetAttrBool(n->def(), kDeferVariableUpdatesAttr);
    if (on.ok() && *on) return true;
    stack.insert(stack.end(), n->control_inputs().begin(), n->control_inputs().end());
  }
  return false;
}

}  // namespace

Output MonitoredSession::StepAfter(const std::vector<Operation>& targets) {
  std::vector<const Node*> key;
  for (const Operation& t : targets) key.push_back(t.node());
  auto it = step_after_.find(key);
  if (it != step_after_.end()) return it->second;
  // A step that defers its updates is not held back for the read: the
  // global step is read as the step starts on its task, so it may lag the
  // step's own increment (and the one still in flight) by up to two.
  Scope s = scope_.WithNoControlDependencies().WithDevice(options_.global_step.node()->def().device());
  if (!DefersUpdates(targets)) s = s.WithControlDependencies(targets);
  Output read = ops::Identity(s.WithFullOpName(scope_.GetUniqueName("global_step_after_step")), options_.global_step);
  step_after_.emplace(std::move(key), read);
  return read;
}

absl::Status MonitoredSession::InitialiseUnsaved() {
  if (unsaved_inits_.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<Tensor> ready, session_->Run(unsaved_ready_));
  std::vector<Operation> todo;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (!ready[i].scalar<bool>()) todo.push_back(unsaved_inits_[i]);
  }
  if (todo.empty()) return absl::OkStatus();
  return session_->Run({}, {}, todo).status();
}

bool MonitoredSession::ModelSurvived() {
  if (ready_checks_.empty()) return false;
  absl::StatusOr<std::vector<Tensor>> r = session_->Run(ready_checks_);
  if (!r.ok()) return false;
  for (const Tensor& t : *r) {
    if (!t.scalar<bool>()) return false;
  }
  return true;
}

absl::Status MonitoredSession::WaitUntilReady(absl::Time recovery_deadline) {
  if (ready_checks_.empty()) return absl::OkStatus();
  const absl::Time deadline = std::min(NowOf(options_.env) + options_.ready_timeout, recovery_deadline);
  absl::Time next_log = NowOf(options_.env) + absl::Seconds(5);
  std::vector<std::string> not_ready = var_names_;
  absl::Status last_error;
  bool answered = false;  // a readiness check has answered at all
  while (true) {
    absl::StatusOr<std::vector<Tensor>> r = session_->Run(ready_checks_);
    if (r.ok()) {
      answered = true;
      last_error = absl::OkStatus();
      not_ready.clear();
      for (size_t i = 0; i < r->size(); ++i) {
        if (!(*r)[i].scalar<bool>()) not_ready.push_back(var_names_[i]);
      }
      if (not_ready.empty()) return absl::OkStatus();
    } else if (absl::IsAborted(r.status())) {
      // A task restarted and no longer knows this session's graphs: waiting
      // with this session would never end. The caller builds a new one.
      return r.status();
    } else if (Recoverable(r.status())) {
      last_error = r.status();  // a task still starting or restarting: keep waiting
    } else {
      return r.status();
    }
    absl::Time now = NowOf(options_.env);
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "The model was not initialised within ",
          absl::FormatDuration(deadline == recovery_deadline ? options_.recovery_timeout : options_.ready_timeout),
          ": the chief (worker task 0) should initialise or restore it. ",
          answered ? absl::StrCat("Variables not ready: ", FirstNames(not_ready, 8))
                   : "The readiness check never answered",
          last_error.ok() ? "" : absl::StrCat(". Last error: ", last_error.message())));
    }
    if (now >= next_log) {
      if (last_error.ok()) {
        LOG(INFO) << "Waiting for the chief to initialise the model; " << not_ready.size() << " of "
                  << var_names_.size() << " variables not ready: " << FirstNames(not_ready, 5);
      } else {
        LOG(INFO) << "Waiting for the chief to initialise the model; the readiness check failed: "
                  << last_error.message();
      }
      next_log = now + absl::Seconds(5);
    }
    SleepOn(options_.env, absl::Milliseconds(200));
  }
}

absl::Status MonitoredSession::CreateSession(absl::Time deadline) {
  const bool recreating = session_ != nullptr;
  if (session_ != nullptr) (void)session_->Close();
  SessionOptions session_options = options_.session_options;
  if (deadline != absl::InfiniteFuture()) {
    // Wait for the cluster no longer than the recovery may still take.
    const int64_t configured = session_options.wait_for_cluster_ms > 0 ? session_options.wait_for_cluster_ms : 300000;
    session_options.wait_for_cluster_ms =
        std::max<int64_t>(1, std::min(configured, absl::ToInt64Milliseconds(deadline - NowOf(options_.env))));
  }
  session_ = std::make_unique<Session>(target_, session_options);
  restored_from_.clear();
  if (options_.is_chief && recreating && ModelSurvived()) {
    // A recovery whose tasks kept the model (a peer died, not the task
    // holding the variables): initialising or restoring it again would
    // throw away the steps since the last checkpoint.
    ASSIGN_OR_RETURN(global_step_, ReadGlobalStep());
    LOG(INFO) << "The model survived on its tasks (global step " << global_step_ << "); keeping it";
  } else if (options_.is_chief) {
    bool restored = false;
    if (saver_ != nullptr) {
      absl::StatusOr<std::string> from = saver_->RestoreLatest(session_.get(), options_.logdir);
      if (from.ok()) {
        restored = true;
        restored_from_ = *from;
        RETURN_IF_ERROR(InitialiseUnsaved());
      } else if (options_.start_fresh_if_incompatible && absl::IsFailedPrecondition(from.status())) {
        LOG(WARNING) << from.status().message() << " -- starting afresh, as asked (start_fresh_if_incompatible)";
      } else if (!absl::IsNotFound(from.status())) {
        return from.status();
      }
    }
    if (!restored) {
      RETURN_IF_ERROR(session_->Run(options_.init_feed_dict, {}, {options_.init_op}).status());
    }
    reached_cluster_ = true;
    ASSIGN_OR_RETURN(global_step_, ReadGlobalStep());
    if (restored) {
      LOG(INFO) << "Restored the model from " << restored_from_ << " (global step " << global_step_ << ")";
    } else {
      LOG(INFO) << "Initialised the model" << (saver_ ? " (no checkpoint yet in " + options_.logdir + ")" : "");
    }
    last_save_step_ = global_step_;
    last_save_time_ = NowOf(options_.env);
  } else {
    RETURN_IF_ERROR(WaitUntilReady(deadline));
    reached_cluster_ = true;
    ASSIGN_OR_RETURN(global_step_, ReadGlobalStep());
  }
  if (options_.local_init_op.ok()) {
    // Within the recovery's deadline: local_init_op may wait for peers (a
    // collective group being rebuilt waits for every rank).
    RunOptions within;
    if (deadline != absl::InfiniteFuture()) {
      within.timeout_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - NowOf(options_.env)));
    }
    absl::StatusOr<std::vector<Tensor>> r =
        session_->Run(options_.local_init_feed_dict, {}, {options_.local_init_op}, within);
    if (!r.ok()) {
      return WithMessage(r.status(), absl::StrCat("Running the local_init_op failed: ", r.status().message()));
    }
  }
  for (auto& h : hooks_) RETURN_IF_ERROR(h->AfterCreateSession(this));
  return absl::OkStatus();
}

absl::StatusOr<std::string> MonitoredSession::SaveCheckpoint() {
  if (saver_ == nullptr || !options_.is_chief) {
    return absl::FailedPreconditionError("Only the chief with a logdir saves checkpoints");
  }
  ASSIGN_OR_RETURN(int64_t step, ReadGlobalStep());
  ASSIGN_OR_RETURN(std::string prefix, saver_->Save(session_.get(), options_.logdir, step));
  last_save_step_ = step;
  last_save_time_ = NowOf(options_.env);
  return prefix;
}

absl::StatusOr<std::vector<Tensor>> MonitoredSession::Run(const FeedDict& feeds, const std::vector<Output>& fetches,
                                                          const std::vector<Operation>& targets,
                                                          const RunOptions& run_options) {
  if (closed_) return absl::FailedPreconditionError("MonitoredSession::Run after Close");
  for (int attempt = 0;; ++attempt) {
    std::vector<Output> all = fetches;
    std::vector<size_t> hook_begin;
    for (auto& h : hooks_) {
      hook_begin.push_back(all.size());
      for (Output& o : h->BeforeRun()) all.push_back(std::move(o));
    }
    const size_t step_at = all.size();
    if (options_.global_step.ok()) all.push_back(StepAfter(targets));
    absl::StatusOr<std::vector<Tensor>> r = session_->Run(feeds, all, targets, run_options);
    if (!r.ok()) {
      if (!Recoverable(r.status()) || attempt >= options_.max_recoveries) return r.status();
      LOG(WARNING) << "Step failed (" << r.status().message() << "); recreating the session (" << attempt + 1
                   << " of at most " << options_.max_recoveries << ")";
      const absl::Time give_up = NowOf(options_.env) + options_.recovery_timeout;
      absl::Status created;
      // Attempts that fail are bounded by recovery_timeout, not counted as
      // recoveries: one that needs a task the cluster knows is gone fails at
      // once (WaitForDevices), and the task may be back a few seconds later.
      do {
        SleepOn(options_.env, options_.recovery_wait);
        created = CreateSession(give_up);
        if (!created.ok()) LOG(WARNING) << "Recreating the session failed: " << created.message();
      } while (!created.ok() && Recoverable(created) && NowOf(options_.env) < give_up);
      if (!created.ok()) {
        if (NowOf(options_.env) < give_up) return created;
        return absl::Status(created.code(),
                            absl::StrCat("Gave up recovering after ", absl::FormatDuration(options_.recovery_timeout),
                                         " (SupervisorOptions::recovery_timeout) from: ", r.status().message(),
                                         "; the last attempt: ", created.message()));
      }
      ++total_recoveries_;
      continue;
    }
    if (options_.global_step.ok()) {
      ASSIGN_OR_RETURN(global_step_, StepValue((*r)[step_at]));
    }
    for (size_t i = 0; i < hooks_.size(); ++i) {
      size_t end = i + 1 < hooks_.size() ? hook_begin[i + 1] : step_at;
      std::vector<Tensor> values(r->begin() + static_cast<std::ptrdiff_t>(hook_begin[i]),
                                 r->begin() + static_cast<std::ptrdiff_t>(end));
      RETURN_IF_ERROR(hooks_[i]->AfterRun(this, global_step_, values));
    }
    if (saver_ != nullptr && options_.is_chief) {
      bool by_steps =
          options_.save_checkpoint_steps > 0 && global_step_ - last_save_step_ >= options_.save_checkpoint_steps;
      bool by_time = options_.save_checkpoint_secs > 0 &&
                     NowOf(options_.env) - last_save_time_ >= absl::Seconds(options_.save_checkpoint_secs);
      if (by_steps || by_time) {
        absl::StatusOr<std::string> saved = SaveCheckpoint();
        if (saved.ok()) {
          LOG(INFO) << "Saved checkpoint " << *saved;
        } else {
          // Training goes on; the previous checkpoint is still valid.
          LOG(ERROR) << saved.status().message();
          last_save_time_ = NowOf(options_.env);
          last_save_step_ = global_step_;
        }
      }
    }
    r->resize(fetches.size());
    return r;
  }
}

absl::Status MonitoredSession::Close() {
  if (closed_) return absl::OkStatus();
  absl::Status status;
  for (auto& h : hooks_) status.Update(h->End(this));
  if (saver_ != nullptr && options_.is_chief) {
    absl::StatusOr<std::string> saved = SaveCheckpoint();
    if (saved.ok()) {
      LOG(INFO) << "Saved checkpoint " << *saved;
    } else {
      status.Update(saved.status());
    }
  }
  closed_ = true;
  if (summary_writer_ != nullptr) status.Update(summary_writer_->Close());
  status.Update(session_->Close());
  return status;
}

}  // namespace distflow

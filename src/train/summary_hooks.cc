#include "distflow/train/summary_hooks.h"

#include <utility>

#include "base/env.h"

namespace distflow {
namespace {

absl::Time NowOf(Env* env) { return absl::FromUnixMicros((env != nullptr ? env : Env::Default())->NowMicros()); }

}  // namespace

SummarySaverHook::SummarySaverHook(std::shared_ptr<EventWriter> writer, Output summary_op, int64_t every_steps,
                                   absl::Duration every)
    : writer_(std::move(writer)), summary_op_(std::move(summary_op)), every_steps_(every_steps), every_(every) {}

absl::Status SummarySaverHook::AfterCreateSession(MonitoredSession* session) {
  global_step_ = session->global_step();
  env_ = session->env();
  return absl::OkStatus();
}

std::vector<Output> SummarySaverHook::BeforeRun() {
  // The step about to run ends at global_step_ + 1 (one increment per step).
  const bool first = last_saved_step_ < 0;
  const bool by_steps = every_steps_ > 0 && global_step_ + 1 >= last_saved_step_ + every_steps_;
  const bool by_time = every_ > absl::ZeroDuration() && NowOf(env_) - last_saved_time_ >= every_;
  requested_ = first || by_steps || by_time;
  if (!requested_) return {};
  return {summary_op_};
}

absl::Status SummarySaverHook::AfterRun(MonitoredSession*, int64_t global_step, const std::vector<Tensor>& values) {
  global_step_ = global_step;
  if (!requested_ || values.empty()) return absl::OkStatus();
  last_saved_step_ = global_step;
  last_saved_time_ = NowOf(env_);
  return writer_->WriteSummary(global_step, values[0].flat<std::string>()[0]);
}

absl::Status SummarySaverHook::End(MonitoredSession*) { return writer_->Flush(); }

StepCounterHook::StepCounterHook(std::shared_ptr<EventWriter> writer, int64_t every_steps, std::string tag)
    : writer_(std::move(writer)), every_steps_(every_steps), tag_(std::move(tag)) {}

absl::Status StepCounterHook::AfterCreateSession(MonitoredSession* session) {
  // After a recovery the count starts again: the time spent recovering is not training.
  last_step_ = session->global_step();
  last_time_ = NowOf(session->env());
  return absl::OkStatus();
}

absl::Status StepCounterHook::AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>&) {
  if (last_step_ < 0) {
    last_step_ = global_step;
    last_time_ = NowOf(session->env());
    return absl::OkStatus();
  }
  if (every_steps_ <= 0 || global_step - last_step_ < every_steps_) return absl::OkStatus();
  const absl::Time now = NowOf(session->env());
  const double secs = absl::ToDoubleSeconds(now - last_time_);
  const double rate = secs > 0 ? static_cast<double>(global_step - last_step_) / secs : 0.0;
  last_step_ = global_step;
  last_time_ = now;
  return writer_->WriteScalar(global_step, tag_, static_cast<float>(rate));
}

absl::Status StepCounterHook::End(MonitoredSession*) { return writer_->Flush(); }

}  // namespace distflow

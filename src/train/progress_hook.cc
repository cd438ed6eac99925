#include "distflow/train/progress_hook.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/env.h"
#include "base/metrics.h"

namespace distflow {

namespace {

std::string Eta(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  return absl::FormatDuration(absl::Seconds(static_cast<int64_t>(seconds + 0.5)));
}

}  // namespace

ProgressHook::ProgressHook(ProgressOptions options) : options_(std::move(options)) {
  terminal_ = options_.terminal < 0 ? isatty(fileno(options_.out)) == 1 : options_.terminal == 1;
}

std::vector<Output> ProgressHook::BeforeRun() {
  if (options_.loss.ok()) return {options_.loss};
  return {};
}

std::string ProgressHook::FormatLine(int64_t step, int64_t last_step, double steps_per_sec, double examples_per_sec,
                                     const double* loss, bool show_examples) {
  std::string line = absl::StrCat("global step ", step);
  if (last_step > 0) {
    absl::StrAppend(&line, "/", last_step,
                    absl::StrFormat(" (%d%%)", static_cast<int>(100 * std::min(step, last_step) / last_step)));
  }
  absl::StrAppend(&line, absl::StrFormat(" | %.1f steps/s", steps_per_sec));
  if (show_examples) absl::StrAppend(&line, absl::StrFormat(" | %.0f examples/s", examples_per_sec));
  if (loss != nullptr) absl::StrAppend(&line, absl::StrFormat(" | loss %.4f", *loss));
  if (last_step > 0 && step < last_step) {
    absl::StrAppend(&line, " | ETA ",
                    steps_per_sec > 0 ? Eta(static_cast<double>(last_step - step) / steps_per_sec) : "?");
  }
  return line;
}

void ProgressHook::Print(int64_t step, const double* loss, bool final_line) {
  std::string line =
      FormatLine(step, options_.last_step, rate_, rate_ * static_cast<double>(options_.examples_per_step), loss,
                 options_.examples_per_step > 0);
  if (terminal_) {
    // Redraw: back to the line's start, and blank what a longer line left.
    const size_t width = line.size();
    if (width < drawn_width_) line.append(drawn_width_ - width, ' ');
    drawn_width_ = width;
    std::fprintf(options_.out, "\r%s%s", line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
}

absl::Status ProgressHook::AfterRun(MonitoredSession* session, int64_t global_step, const std::vector<Tensor>& values) {
  if (session != nullptr) env_ = session->env();
  const absl::Time now = Now();
  if (!values.empty() && values[0].NumElements() == 1) {
    have_loss_ = true;
    loss_ =
        values[0].dtype() == DT_DOUBLE ? values[0].scalar<double>() : static_cast<double>(values[0].scalar<float>());
  }
  step_ = global_step;
  if (last_step_ < 0) {  // the first step starts the clock
    last_step_ = first_step_ = global_step;
    last_print_ = first_time_ = now;
    return absl::OkStatus();
  }
  const absl::Duration every = terminal_ ? options_.redraw_every : options_.plain_every;
  if (finished_) return absl::OkStatus();
  if (now - last_print_ < every) return absl::OkStatus();
  rate_ = static_cast<double>(global_step - last_step_) / absl::ToDoubleSeconds(now - last_print_);
  last_step_ = global_step;
  last_print_ = now;
  Print(global_step, have_loss_ ? &loss_ : nullptr, false);
  return absl::OkStatus();
}

void ProgressHook::ClearLine() {
  if (!terminal_ || drawn_width_ == 0) return;
  std::fprintf(options_.out, "\r\033[K");
  std::fflush(options_.out);
  drawn_width_ = 0;
}

absl::Time ProgressHook::Now() const {
  return absl::FromUnixMicros((env_ != nullptr ? env_ : Env::Default())->NowMicros());
}

void ProgressHook::Finish() {
  if (finished_) return;
  finished_ = true;
  // The final line: the whole run's rate.
  const double secs = absl::ToDoubleSeconds(Now() - first_time_);
  if (first_step_ >= 0 && step_ > first_step_ && secs > 0) {
    rate_ = static_cast<double>(step_ - first_step_) / secs;
  }
  if (step_ >= 0) Print(step_, have_loss_ ? &loss_ : nullptr, true);
}

absl::Status ProgressHook::End(MonitoredSession*) {
  Finish();
  return absl::OkStatus();
}

ScalarSummaryHook::ScalarSummaryHook(std::vector<std::pair<std::string, Output>> scalars, int64_t every_n_steps)
    : scalars_(std::move(scalars)), every_(std::max<int64_t>(1, every_n_steps)) {}

std::vector<Output> ScalarSummaryHook::BeforeRun() {
  std::vector<Output> out;
  for (const auto& [name, o] : scalars_) out.push_back(o);
  return out;
}

absl::Status ScalarSummaryHook::AfterRun(MonitoredSession*, int64_t global_step, const std::vector<Tensor>& values) {
  if (last_reported_ >= 0 && global_step / every_ == last_reported_ / every_) return absl::OkStatus();
  last_reported_ = global_step;
  for (size_t i = 0; i < values.size() && i < scalars_.size(); ++i) {
    const Tensor& v = values[i];
    if (v.NumElements() != 1) continue;
    double x = 0;
    switch (v.dtype()) {
      case DT_FLOAT:
        x = v.flat<float>()[0];
        break;
      case DT_DOUBLE:
        x = v.flat<double>()[0];
        break;
      case DT_INT32:
        x = v.flat<int32_t>()[0];
        break;
      case DT_INT64:
        x = static_cast<double>(v.flat<int64_t>()[0]);
        break;
      default:
        continue;
    }
    Metrics::Global()->RecordScalar(scalars_[i].first, global_step, x);
  }
  return absl::OkStatus();
}

}  // namespace distflow

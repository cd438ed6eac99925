#include "distflow/train/progress_hook.h"

#include <cstdio>
#include <string>

#include "distflow/ops.h"
#include "distflow/train/optimizer.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(ProgressHook, FormatsStepRateExamplesLossAndEta) {
  double loss = 0.41212;
  EXPECT_EQ(ProgressHook::FormatLine(1200, 5000, 31.2, 1560, &loss, true),
            "global step 1200/5000 (24%) | 31.2 steps/s | 1560 examples/s | loss 0.4121 | ETA 2m2s");
  // No total: no percentage, no ETA; no examples or loss when not given.
  EXPECT_EQ(ProgressHook::FormatLine(7, 0, 2.0, 0, nullptr, false), "global step 7 | 2.0 steps/s");
  // At the end, no ETA; a stalled rate gives an unknown ETA.
  EXPECT_EQ(ProgressHook::FormatLine(5000, 5000, 3.0, 0, nullptr, false), "global step 5000/5000 (100%) | 3.0 steps/s");
  EXPECT_EQ(ProgressHook::FormatLine(10, 100, 0.0, 0, nullptr, false),
            "global step 10/100 (10%) | 0.0 steps/s | ETA ?");
}

// Trains y = w * x for 6 steps with the hook writing to a temporary file.
std::string Train(int terminal, absl::Duration every = absl::ZeroDuration()) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {});
  Output w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 0.0f));
  Output step = CreateGlobalStep(root);
  Output diff = ops::Sub(root, ops::Mul(root, w, x), ops::Mul(root, ops::Const(root, 3.0f), x));
  Output loss = ops::Mul(root, diff, diff);
  GradientDescentOptimizer sgd(0.1);
  Operation train = *sgd.Minimize(root, loss, &step);
  FILE* out = std::tmpfile();
  ProgressOptions p;
  p.last_step = 6;
  p.examples_per_step = 1;
  p.loss = loss;
  p.out = out;
  p.terminal = terminal;
  p.redraw_every = every;
  p.plain_every = every;
  SupervisorOptions o;
  o.global_step = step;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<StopAtStepHook>(6));
  hooks.push_back(std::make_unique<ProgressHook>(p));
  auto s = MonitoredSession::Create(root, "", o, std::move(hooks));
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return "";
  while (!(*s)->ShouldStop()) EXPECT_TRUE((*s)->Run({{x, Tensor::Scalar<float>(1.0f)}}, {}, {train}).ok());
  EXPECT_TRUE((*s)->Close().ok());
  std::rewind(out);
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), out)) > 0) text.append(buf, n);
  std::fclose(out);
  return text;
}

TEST(ProgressHook, PlainLinesWhenNotATerminal) {
  const std::string text = Train(0);
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  // Steps 2..6 each print (the first starts the clock), and End once more.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6) << text;
  EXPECT_NE(text.find("global step 2/6 (33%)"), std::string::npos) << text;
  EXPECT_NE(text.find("global step 6/6 (100%)"), std::string::npos) << text;
  EXPECT_NE(text.find("loss "), std::string::npos) << text;
}

TEST(ProgressHook, TheFinalLineOfARunShorterThanOneIntervalHasItsRate) {
  // No line is due within the run; the final one reports the whole run's rate.
  const std::string text = Train(0, absl::Hours(1));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("global step 6/6 (100%)"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 0.0 steps/s"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 0 examples/s"), std::string::npos) << text;
}

TEST(ProgressHook, OneLineRedrawnInPlaceOnATerminal) {
  const std::string text = Train(1);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 6) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;  // only at the end
  EXPECT_EQ(text.back(), '\n');
  // The last redraw is the final state.
  EXPECT_NE(text.substr(text.rfind('\r')).find("global step 6/6 (100%)"), std::string::npos) << text;
}

}  // namespace
}  // namespace distflow

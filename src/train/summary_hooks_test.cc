#include "distflow/train/summary_hooks.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/fake_clock_env.h"
#include "distflow/distflow.h"
#include "gtest/gtest.h"
#include "proto/event.pb.h"
#include "proto/graph.pb.h"
#include "train/event_file_testutil.h"

namespace distflow {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  std::string dir = (fs::path(::testing::TempDir()) / absl::StrCat("summary_hooks_", name, "_", ::getpid())).string();
  fs::remove_all(dir);
  return dir;
}

std::string OnlyEventFile(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) found.push_back(e.path().string());
  }
  EXPECT_EQ(found.size(), 1u) << dir;
  return found.empty() ? "" : found[0];
}

// y = w * x trained towards w = 3, with a summary of the loss.
struct Model {
  Scope root = Scope::NewRootScope();
  Output x, w, loss, step, summary;
  Operation train;
  Model() {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {});
    w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 0.0f));
    step = CreateGlobalStep(root);
    auto diff = ops::Sub(root, ops::Mul(root, w, x), ops::Mul(root, ops::Const(root, 3.0f), x));
    loss = ops::Mul(root, diff, diff);
    summary = Output(ops::Raw(root.WithOpName("loss_summary"), "ScalarSummary",
                              {ops::Const(root, Tensor::Scalar<std::string>("loss")), loss}, ops::Attrs{}),
                     0, root);
    GradientDescentOptimizer sgd(0.1);
    train = *sgd.Minimize(root, loss, &step);
  }
};

TEST(SummaryHooks, ChiefWritesGraphSummariesAndStepsPerSecond) {
  const std::string dir = TempDir("chief");
  Model m;
  SupervisorOptions o;
  o.logdir = dir;
  o.global_step = m.step;
  o.save_checkpoint_secs = 0;
  o.summary_op = m.summary;
  o.save_summaries_steps = 2;
  o.log_step_count_steps = 3;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<StopAtStepHook>(7));
  auto s = MonitoredSession::Create(m.root, "", o, std::move(hooks));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_NE((*s)->summary_writer(), nullptr);
  std::vector<float> losses;
  while (!(*s)->ShouldStop()) {
    auto r = (*s)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {m.loss}, {m.train});
    ASSERT_TRUE(r.ok()) << r.status();
    losses.push_back((*r)[0].scalar<float>());
  }
  ASSERT_TRUE((*s)->Close().ok());
  ASSERT_EQ(losses.size(), 7u);

  std::vector<tensorboard::Event> events = test::ReadEvents(OnlyEventFile(dir));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  proto::GraphDef graph;
  ASSERT_TRUE(graph.ParseFromString(events[1].graph_def()));
  EXPECT_GT(graph.node_size(), 5);
  std::vector<std::pair<int64_t, float>> summaries, rates;
  for (const tensorboard::Event& e : events) {
    if (!e.has_summary()) continue;
    ASSERT_EQ(e.summary().value_size(), 1);
    const auto& v = e.summary().value(0);
    if (v.tag() == "loss") {
      summaries.emplace_back(e.step(), v.simple_value());
    } else {
      EXPECT_EQ(v.tag(), "global_step/sec");
      rates.emplace_back(e.step(), v.simple_value());
    }
  }
  // Fetched with steps 1, 3, 5, 7: the loss computed in that step.
  ASSERT_EQ(summaries.size(), 4u);
  for (size_t i = 0; i < summaries.size(); ++i) {
    EXPECT_EQ(summaries[i].first, static_cast<int64_t>(2 * i + 1));
    EXPECT_EQ(summaries[i].second, losses[2 * i]);
  }
  // Counted from the session's creation (global step 0): at 3 and 6.
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].first, 3);
  EXPECT_EQ(rates[1].first, 6);
  EXPECT_GT(rates[0].second, 0.0f);
}

// save_summaries_secs and "global_step/sec" run on the session's clock: a
// fake one decides when a summary is due and what rate is written.
TEST(SummaryHooks, SummariesBySecondsAndTheStepRateFollowTheSessionsClock) {
  const std::string dir = TempDir("clock");
  Model m;
  FakeClockEnv clock;
  SupervisorOptions o;
  o.env = &clock;
  o.logdir = dir;
  o.global_step = m.step;
  o.save_checkpoint_secs = 0;
  o.summary_op = m.summary;
  o.save_summaries_steps = 0;
  o.save_summaries_secs = 60;
  o.log_step_count_steps = 4;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  // Each step advances the clock by 0.5 s after it ran, some also before.
  // Step 1 always writes; steps 2 and 3 start 58.5 and 59 s after it (no
  // summary), step 4 61.5 s after it (a summary).
  const std::vector<absl::Duration> before = {absl::ZeroDuration(), absl::Seconds(58),    absl::ZeroDuration(),
                                              absl::Seconds(2),     absl::ZeroDuration(), absl::ZeroDuration(),
                                              absl::ZeroDuration(), absl::ZeroDuration()};
  for (absl::Duration d : before) {
    clock.Advance(d);
    ASSERT_TRUE((*s)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {}, {m.train}).ok());
    clock.Advance(absl::Milliseconds(500));
  }
  ASSERT_TRUE((*s)->Close().ok());

  std::vector<int64_t> summary_steps;
  std::vector<std::pair<int64_t, float>> rates;
  for (const tensorboard::Event& e : test::ReadEvents(OnlyEventFile(dir))) {
    if (!e.has_summary()) continue;
    const auto& v = e.summary().value(0);
    if (v.tag() == "loss") summary_steps.push_back(e.step());
    if (v.tag() == "global_step/sec") rates.emplace_back(e.step(), v.simple_value());
  }
  EXPECT_EQ(summary_steps, (std::vector<int64_t>{1, 4})) << "the first step, then the first step 60 s later";
  // From creation (step 0) to step 4: 4 steps in 58 + 2 + 3 * 0.5 = 61.5 s;
  // from step 4 to 8: 4 steps in 4 * 0.5 = 2 s.
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_EQ(rates[0].first, 4);
  EXPECT_FLOAT_EQ(rates[0].second, 4.0f / 61.5f);
  EXPECT_EQ(rates[1].first, 8);
  EXPECT_FLOAT_EQ(rates[1].second, 2.0f);
}

TEST(SummaryHooks, NoLogdirWritesNothing) {
  Model m;
  SupervisorOptions o;
  o.global_step = m.step;
  o.summary_op = m.summary;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->summary_writer(), nullptr);
  ASSERT_TRUE((*s)->Close().ok());
}

TEST(SummaryHooks, BadLogdirIsAnErrorNamingIt) {
  const std::string dir = TempDir("bad");
  fs::create_directories(dir);
  const std::string file = dir + "/file";
  {
    FILE* f = fopen(file.c_str(), "w");
    fputs("x", f);
    fclose(f);
  }
  Model m;
  SupervisorOptions o;
  o.global_step = m.step;
  o.logdir = file;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find(file), std::string::npos) << s.status();
}

}  // namespace
}  // namespace distflow

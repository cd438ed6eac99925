#include "distflow/train/supervisor.h"

#include <filesystem>
#include <string>
#include <vector>

#include "base/fake_clock_env.h"
#include "distflow/distflow.h"
#include "distflow/train/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  std::string dir = (fs::path(::testing::TempDir()) / absl::StrCat("supervisor_", name, "_", ::getpid())).string();
  fs::remove_all(dir);
  return dir;
}

// y = w * x, trained towards w = 3 by gradient descent.
struct Model {
  Scope root = Scope::NewRootScope();
  Output x, w, loss, step;
  Operation train;
  Model() {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {});
    w = ops::MakeVariable(root.WithOpName("w"), ops::Const(root, 0.0f));
    step = CreateGlobalStep(root);
    auto diff = ops::Sub(root, ops::Mul(root, w, x), ops::Mul(root, ops::Const(root, 3.0f), x));
    loss = ops::Mul(root, diff, diff);
    GradientDescentOptimizer sgd(0.1);
    train = *sgd.Minimize(root, loss, &step);
  }
};

TEST(MonitoredSession, ChiefInitialisesTrainsSavesAndRestores) {
  const std::string dir = TempDir("chief");
  float w_at_end = 0;
  {
    Model m;
    SupervisorOptions o;
    o.logdir = dir;
    o.global_step = m.step;
    o.save_checkpoint_steps = 4;
    o.save_checkpoint_secs = 0;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(10));
    hooks.push_back(std::make_unique<LoggingHook>(m.loss, 5));
    auto s = MonitoredSession::Create(m.root, "", o, std::move(hooks));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->restored_from(), "");
    EXPECT_EQ((*s)->global_step(), 0);
    int runs = 0;
    while (!(*s)->ShouldStop()) {
      auto r = (*s)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {m.w}, {m.train});
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->size(), 1u);  // the hooks' and the step's fetches are not returned
      w_at_end = (*r)[0].scalar<float>();
      ++runs;
    }
    EXPECT_EQ(runs, 10);
    EXPECT_GT(w_at_end, 0.0f);  // trained towards 3
    EXPECT_EQ((*s)->global_step(), 10);
    EXPECT_TRUE(fs::exists(dir + "/model.ckpt-4.index"));
    EXPECT_TRUE(fs::exists(dir + "/model.ckpt-8.index"));
    ASSERT_TRUE((*s)->Close().ok());
    EXPECT_TRUE(fs::exists(dir + "/model.ckpt-10.index"));  // saved at the end
  }
  // A restarted chief picks up where the last checkpoint left off.
  Model m;
  SupervisorOptions o;
  o.logdir = dir;
  o.global_step = m.step;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<StopAtStepHook>(10));
  auto s = MonitoredSession::Create(m.root, "", o, std::move(hooks));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->restored_from(), dir + "/model.ckpt-10");
  EXPECT_EQ((*s)->global_step(), 10);
  EXPECT_TRUE((*s)->ShouldStop());  // already at the last step
  auto w = (*s)->raw_session()->Run({m.w});
  ASSERT_TRUE(w.ok());
  EXPECT_NE((*w)[0].scalar<float>(), 0.0f);
}

TEST(MonitoredSession, AnotherModelsLogdirIsAnErrorNotACrash) {
  const std::string dir = TempDir("other");
  {
    Scope root = Scope::NewRootScope();
    ops::MakeVariable(root.WithOpName("something_else"), ops::Const(root, 1.0));
    SupervisorOptions o;
    o.logdir = dir;
    o.global_step = CreateGlobalStep(root);
    auto s = MonitoredSession::Create(root, "", o);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE((*s)->Close().ok());
  }
  Model m;
  SupervisorOptions o;
  o.logdir = dir;
  o.global_step = m.step;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("something_else"));
  // Asked to, the chief starts afresh and its checkpoints become the latest.
  o.start_fresh_if_incompatible = true;
  auto fresh = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ((*fresh)->restored_from(), "");
  EXPECT_EQ((*fresh)->global_step(), 0);
  ASSERT_TRUE((*fresh)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {}, {m.train}).ok());
  ASSERT_TRUE((*fresh)->Close().ok());
  auto again = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE((*again)->restored_from(), "");
  EXPECT_EQ((*again)->global_step(), 1);
}

// Fails AfterCreateSession with `error` the first `failures` times.
class FailingCreateHook : public SessionRunHook {
 public:
  FailingCreateHook(absl::Status error, int failures, int* calls)
      : error_(std::move(error)), failures_(failures), calls_(calls) {}
  absl::Status AfterCreateSession(MonitoredSession*) override {
    return ++*calls_ <= failures_ ? error_ : absl::OkStatus();
  }

 private:
  absl::Status error_;
  int failures_;
  int* calls_;
};

// A chief's MonitoredSession on a fake clock whose hook fails
// AfterCreateSession with `error` the first `failures` times; `calls`
// counts the hook's calls.
struct CreateWithFailingHook {
  Model m;
  FakeClockEnv clock;
  int calls = 0;
  absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(absl::Status error, int failures,
                                                           absl::Duration recovery_timeout = absl::Minutes(5)) {
    SupervisorOptions o;
    o.global_step = m.step;
    o.env = &clock;
    o.recovery_timeout = recovery_timeout;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<FailingCreateHook>(std::move(error), failures, &calls));
    return MonitoredSession::Create(m.root, "", o, std::move(hooks));
  }
};

// A peer that stops answering while the session is made (the cluster had
// answered: the model was initialised) is met as a step's recovery meets
// it: the session is made again, within recovery_timeout.
TEST(MonitoredSession, CreateMakesTheSessionAgainAfterAnUnavailableOnceTheClusterAnswered) {
  CreateWithFailingHook t;
  auto s = t.Create(
      absl::UnavailableError("Task /job:ps/task:0 (the cluster's coordinator) has not answered heartbeats"), 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(t.calls, 3);
  EXPECT_TRUE((*s)->Run({{t.m.x, Tensor::Scalar<float>(1.0f)}}, {}, {t.m.train}).ok());
}

TEST(MonitoredSession, CreateGivesUpAfterRecoveryTimeoutNamingTheLastError) {
  CreateWithFailingHook t;
  auto s = t.Create(absl::UnavailableError("ps 0 is silent"), 1 << 20, absl::Minutes(2));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("Gave up creating the session after 2m"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("ps 0 is silent"));
  // One attempt per recovery_wait (1 s) for two minutes, give or take one.
  EXPECT_GE(t.calls, 100);
  EXPECT_LE(t.calls, 125);
}

// Errors that are not a peer's absence end Create at once.
TEST(MonitoredSession, CreateDoesNotRetryOtherErrors) {
  CreateWithFailingHook t;
  auto s = t.Create(absl::InvalidArgumentError("bad hook"), 5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.calls, 1);
}

TEST(MonitoredSession, NonChiefGivesUpNamingTheVariablesNotReady) {
  Model m;
  SupervisorOptions o;
  o.is_chief = false;
  o.global_step = m.step;
  // Ten minutes on a clock that moves only by the session's own sleeps: the
  // test takes milliseconds and cannot fail on a slow or a fast machine.
  FakeClockEnv clock;
  o.env = &clock;
  o.ready_timeout = absl::Minutes(10);
  // A local session's variables are its own: no chief will ever initialise them.
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("Variables not ready: w"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("global_step"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("10m"));
  absl::Duration slept;
  for (absl::Duration d : clock.Sleeps()) slept += d;
  EXPECT_GE(slept, absl::Minutes(10) - absl::Milliseconds(200)) << "it waited the whole ready_timeout";
  EXPECT_LE(slept, absl::Minutes(10) + absl::Milliseconds(200));
}

// save_checkpoint_secs counts on the session's clock: no checkpoint until
// the interval has passed, one at the first step after it.
TEST(MonitoredSession, ChiefSavesWhenTheCheckpointIntervalHasPassed) {
  const std::string dir = TempDir("by_time");
  Model m;
  FakeClockEnv clock;
  SupervisorOptions o;
  o.env = &clock;
  o.logdir = dir;
  o.global_step = m.step;
  o.save_checkpoint_secs = 600;
  o.save_checkpoint_steps = 0;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto step = [&] { return (*s)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {}, {m.train}).status(); };
  ASSERT_TRUE(step().ok());
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-1.index")) << "the interval starts when the session is made";
  clock.Advance(absl::Seconds(599));
  ASSERT_TRUE(step().ok());
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-2.index")) << "599 s of 600 have passed";
  clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(step().ok());
  EXPECT_TRUE(fs::exists(dir + "/model.ckpt-3.index")) << "601 s have passed";
  ASSERT_TRUE(step().ok());
  EXPECT_FALSE(fs::exists(dir + "/model.ckpt-4.index")) << "the interval starts again at the save";
  ASSERT_TRUE((*s)->Close().ok());
}

TEST(MonitoredSession, ALogdirNeedsAGlobalStep) {
  Model m;
  SupervisorOptions o;
  o.logdir = TempDir("nostep");
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("global_step"));
}

// TF's init_feed_dict: a variable initialised from a placeholder (a
// pretrained table too large for a graph constant) gets the fed value; a
// missing feed is the placeholder's error, not a crash.
TEST(MonitoredSession, InitFeedDictFeedsTheInitOp) {
  Scope root = Scope::NewRootScope();
  Output init_value = ops::Placeholder(root.WithOpName("pretrained"), DT_FLOAT, PartialShape({3}));
  Output table = ops::MakeVariable(root.WithOpName("table"), init_value);
  SupervisorOptions o;
  o.global_step = CreateGlobalStep(root);
  o.init_feed_dict = {{init_value, Tensor::FromVector<float>({1.5f, -2.0f, 4.0f})}};
  auto s = MonitoredSession::Create(root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto v = (*s)->Run({}, {table});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].flat<float>()[0], 1.5f);
  EXPECT_EQ((*v)[0].flat<float>()[2], 4.0f);
  ASSERT_TRUE((*s)->Close().ok());
  o.init_feed_dict.clear();
  auto unfed = MonitoredSession::Create(root, "", o);
  ASSERT_FALSE(unfed.ok());
  EXPECT_THAT(std::string(unfed.status().message()), HasSubstr("pretrained"));
}

// TF's Scaffold(local_init_feed_dict=): the local_init_op runs with these
// feeds (here it sets a local variable from a placeholder); without them it
// fails naming the placeholder.
TEST(MonitoredSession, LocalInitFeedDictFeedsTheLocalInitOp) {
  Scope root = Scope::NewRootScope();
  Output start = ops::Placeholder(root.WithOpName("local_start"), DT_FLOAT, PartialShape({2}));
  Output cursor =
      ops::MakeVariable(root.WithOpName("cursor"), ops::Const(root, Tensor::FromVector<float>({0.0f, 0.0f})));
  SupervisorOptions o;
  o.global_step = CreateGlobalStep(root);
  o.local_variables = {cursor};
  o.local_init_op = ops::Assign(root, cursor, start).op();
  o.local_init_feed_dict = {{start, Tensor::FromVector<float>({7.0f, -3.0f})}};
  auto s = MonitoredSession::Create(root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto v = (*s)->Run({}, {cursor});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].flat<float>()[0], 7.0f);
  EXPECT_EQ((*v)[0].flat<float>()[1], -3.0f);
  ASSERT_TRUE((*s)->Close().ok());
  o.local_init_feed_dict.clear();
  auto unfed = MonitoredSession::Create(root, "", o);
  ASSERT_FALSE(unfed.ok());
  EXPECT_THAT(std::string(unfed.status().message()), HasSubstr("Running the local_init_op failed"));
  EXPECT_THAT(std::string(unfed.status().message()), HasSubstr("local_start"));
}

// TF's Scaffold defaults: with no init_op or local_init_op given, every task
// initialises its local variables itself, a non-chief included (which never
// runs init_op). The graph has no global variables, so a non-chief on an
// in-process session has nothing to wait for.
TEST(MonitoredSession, DefaultScaffoldInitialisesLocalVariablesOnANonChief) {
  Scope root = Scope::NewRootScope();
  ops::VariableOptions local;
  local.local = true;
  Output seen = ops::MakeVariable(root.WithOpName("seen"), ops::Const(root, 0.0f), local);
  // Listed in the options rather than made local: the same treatment.
  Output total = ops::MakeVariable(root.WithOpName("total"), ops::Const(root, 10.0f));
  Operation step = ops::Group(root, {ops::AssignAdd(root, seen, ops::Const(root, 1.0f)).op(),
                                     ops::AssignAdd(root, total, ops::Const(root, 2.0f)).op()});
  SupervisorOptions o;
  o.is_chief = false;
  o.local_variables = {total};
  FakeClockEnv clock;
  o.env = &clock;
  auto s = MonitoredSession::Create(root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*s)->Run({}, {}, {step}).ok());
  auto v = (*s)->Run({}, {seen, total});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), 3.0f);
  EXPECT_EQ((*v)[1].scalar<float>(), 16.0f);
  ASSERT_TRUE((*s)->Close().ok());
}

// The chief's default init_op leaves the local variables to local_init_op:
// one initialised from a placeholder gets its value from
// local_init_feed_dict, and init_op does not need that feed. Checkpoints
// leave local variables out.
TEST(MonitoredSession, DefaultInitOpLeavesLocalVariablesToTheLocalInitOp) {
  const std::string dir = TempDir("local");
  Model m;
  Output start = ops::Placeholder(m.root.WithOpName("start"), DT_FLOAT, PartialShape({}));
  ops::VariableOptions local;
  local.local = true;
  Output cursor = ops::MakeVariable(m.root.WithOpName("cursor"), start, local);
  SupervisorOptions o;
  o.logdir = dir;
  o.global_step = m.step;
  o.local_init_feed_dict = {{start, Tensor::Scalar<float>(5.0f)}};
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Run({{m.x, Tensor::Scalar<float>(1.0f)}}, {}, {m.train}).ok());
  auto v = (*s)->Run({}, {cursor, m.w});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)[0].scalar<float>(), 5.0f);
  EXPECT_GT((*v)[1].scalar<float>(), 0.0f);  // init_op ran and the step trained w
  ASSERT_TRUE((*s)->Close().ok());
  // A default Saver leaves it out too.
  auto saver = Saver::Create(m.root);
  ASSERT_TRUE(saver.ok()) << saver.status();
  for (const Saver::VarInfo& var : (*saver)->variables()) EXPECT_NE(var.name, "cursor");
  EXPECT_EQ((*saver)->variables().size(), 2u);  // w and global_step
}

TEST(MonitoredSession, ALocalVariableWithoutAnInitializerIsNamed) {
  Scope root = Scope::NewRootScope();
  ops::VariableOptions local;
  local.local = true;
  ops::Variable(root.WithOpName("raw_counter"), PartialShape({}), DT_FLOAT, local);
  SupervisorOptions o;
  auto s = MonitoredSession::Create(root, "", o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("local variable 'raw_counter' has no initializer"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("SupervisorOptions::local_init_op"));
}

TEST(MonitoredSession, RunAfterCloseIsAnError) {
  Model m;
  SupervisorOptions o;
  o.global_step = m.step;
  auto s = MonitoredSession::Create(m.root, "", o);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Close().ok());
  EXPECT_EQ((*s)->Run({}, {m.w}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace distflow

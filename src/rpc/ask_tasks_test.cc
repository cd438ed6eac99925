// AskTasks and FailedOnTasks: every task is asked and answers in the order
// given, a task that is down fails alone, and the summary names each task
// that failed. Servers are real, in this process, on 127.0.0.1.
#include "rpc/ask_tasks.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ports.h"
#include "gtest/gtest.h"
#include "rpc/worker_cache.h"
#include "server/session_test_util.h"

namespace distflow {
namespace {

TEST(AskTasks, EveryTaskIsAskedAndATaskThatIsDownFailsAlone) {
  std::unique_ptr<Server> ps = test::StartOneTask(test::LeanOptions(), "ps");
  std::unique_ptr<Server> worker = test::StartOneTask(test::LeanOptions(), "worker");
  ASSERT_NE(ps, nullptr);
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<int> down_port = PickUnusedTcpPort();  // nothing listens there
  ASSERT_TRUE(down_port.ok()) << down_port.status();
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(
      absl::StrCat("down|127.0.0.1:", *down_port, ",ps|127.0.0.1:", ps->port(), ",worker|127.0.0.1:", worker->port()));
  ASSERT_TRUE(spec.ok()) << spec.status();
  WorkerCache workers(*spec, "");
  const std::vector<std::string> tasks = {"/job:worker/replica:0/task:0", "/job:down/replica:0/task:0",
                                          "/job:ps/replica:0/task:0"};
  std::vector<TaskAnswer<proto::GetStatusResponse>> answers = AskTasks<proto::GetStatusResponse>(
      workers, tasks, absl::Seconds(30),
      [](WorkerInterface* w, CallOptions* opts, proto::GetStatusResponse* out, WorkerInterface::StatusCallback done) {
        w->GetStatusAsync(opts, out, std::move(done));
      });
  ASSERT_EQ(answers.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(answers[i].task, tasks[i]);
  ASSERT_TRUE(answers[0].status.ok()) << answers[0].status;
  EXPECT_EQ(answers[0].response.task_name(), tasks[0]);
  EXPECT_EQ(answers[1].status.code(), absl::StatusCode::kUnavailable) << answers[1].status;
  ASSERT_TRUE(answers[2].status.ok()) << "asked although the task before it was down: " << answers[2].status;
  EXPECT_EQ(answers[2].response.task_name(), tasks[2]);
}

TEST(FailedOnTasks, NamesEveryTaskThatFailedWithTheFirstFailuresCode) {
  EXPECT_TRUE(FailedOnTasks("Reset", {}, 3, "the others were reset").ok());
  absl::Status two = FailedOnTasks("Reset",
                                   {{"/job:ps/replica:0/task:0", absl::UnavailableError("connection refused")},
                                    {"/job:worker/replica:0/task:1", absl::DeadlineExceededError("no answer")}},
                                   3, "the others were reset");
  EXPECT_EQ(two.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(two.message(),
            "Reset failed on 2 of 3 task(s) (the others were reset): /job:ps/replica:0/task:0: connection refused; "
            "/job:worker/replica:0/task:1: no answer");
  absl::Status all = FailedOnTasks("Shutdown", {{"/job:ps/replica:0/task:0", absl::InternalError("boom")}}, 1,
                                   "every other task was asked to stop");
  EXPECT_EQ(all.message(), "Shutdown failed on 1 of 1 task(s): /job:ps/replica:0/task:0: boom")
      << "no word on other tasks when there were none";
}

}  // namespace
}  // namespace distflow

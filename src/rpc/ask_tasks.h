// AskTasks: one call to each of several tasks' workers, all at once, each
// with its own deadline; waits for every answer. Used where the master or a
// tool asks the whole cluster something (Reset, ListDevices,
// ShutdownCluster), so that tasks that are down or hung cost one deadline
// in all rather than one each, and one failure does not keep the other
// tasks from being asked. The calls go through WorkerInterface
// (WorkerCacheInterface::GetWorker): this process's own task in memory, the others
// over the transport. FailedOnTasks turns the answers into one status that
// names every task that failed. Thread-compatible (a call's answers belong
// to its caller).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "rpc/worker_cache_interface.h"
#include "rpc/worker_interface.h"

namespace distflow {

template <typename Response>
struct TaskAnswer {
  std::string task;
  absl::Status status;  // the call's, or why it could not be made
  Response response;    // meaningful when `status` is OK
};

// `start(worker, opts, &response, done)` starts the call on the task's
// WorkerInterface, e.g.
//   [&req](WorkerInterface* w, CallOptions* opts, auto* resp, auto done) {
//     w->CleanupAllAsync(opts, &req, std::move(done));
//   }
// `opts` carries `timeout`. Answers come in the order of `tasks`.
template <typename Response, typename Start>
std::vector<TaskAnswer<Response>> AskTasks(WorkerCacheInterface& workers, const std::vector<std::string>& tasks,
                                           absl::Duration timeout, Start start) {
  struct Call {
    std::shared_ptr<WorkerInterface> worker;
    CallOptions opts;
    absl::Status status;
    absl::Notification done;
  };
  std::vector<TaskAnswer<Response>> answers(tasks.size());  // not resized below: calls write into it
  std::vector<std::unique_ptr<Call>> calls(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    answers[i].task = tasks[i];
    absl::StatusOr<std::shared_ptr<WorkerInterface>> worker = workers.GetWorker(tasks[i]);
    if (!worker.ok()) {
      answers[i].status = worker.status();
      continue;
    }
    calls[i] = std::make_unique<Call>();
    Call* c = calls[i].get();
    c->worker = std::move(*worker);
    c->opts.SetTimeout(timeout);
    start(c->worker.get(), &c->opts, &answers[i].response, [c](absl::Status s) {
      c->status = std::move(s);
      c->done.Notify();
    });
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (calls[i] == nullptr) continue;
    calls[i]->done.WaitForNotification();  // bounded by the call's deadline
    answers[i].status = calls[i]->status;
  }
  return answers;
}

// OK if `failed` is empty. Otherwise the first failure's code and
// "<what> failed on F of N task(s)[ (<others>)]: TASK: message; ...", where
// N is `asked` and `others` (said only if some task did not fail) tells what
// became of the rest.
absl::Status FailedOnTasks(absl::string_view what, const std::vector<std::pair<std::string, absl::Status>>& failed,
                           size_t asked, absl::string_view others);

}  // namespace distflow

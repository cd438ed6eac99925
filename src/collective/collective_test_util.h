// The tests' N ranks in one process (gloo's harness style): an executor per
// rank over InProcessCollectives, and Run, which runs one collective on
// chosen ranks, each on its own thread. Header-only, for the collective
// tests.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "collective/collective_executor_impl.h"
#include "collective/in_process_transport.h"
#include "gtest/gtest.h"

namespace distflow {

// Waits for a run that must end; a hang fails the test instead of blocking
// ctest (the bound is far above any run's time).
inline constexpr absl::Duration kHang = absl::Seconds(60);

struct Ranks {
  // `stall_check(r)`: rank r's stall check (null: the default, 60 s).
  explicit Ranks(int n, std::function<StallCheckOptions(int)> stall_check = nullptr) : hub(n) {
    for (int r = 0; r < n; ++r) {
      executors.push_back(std::make_unique<CollectiveExecutorImpl>(hub.TransportFor(r),
                                                                   stall_check ? stall_check(r) : StallCheckOptions{}));
    }
  }
  // Runs `params` on the ranks in `which` (all if empty), each on its own
  // thread with inputs[r]; returns each rank's result.
  std::vector<absl::StatusOr<Tensor>> Run(const CollectiveParams& params, const std::vector<Tensor>& inputs,
                                          std::vector<int> which = {}, std::vector<CancellationManager*> cms = {}) {
    return RunEach(std::vector<CollectiveParams>(static_cast<size_t>(hub.num_ranks()), params), inputs,
                   std::move(which), std::move(cms));
  }
  // The same with rank r running params[r].
  std::vector<absl::StatusOr<Tensor>> RunEach(const std::vector<CollectiveParams>& params,
                                              const std::vector<Tensor>& inputs, std::vector<int> which = {},
                                              std::vector<CancellationManager*> cms = {}) {
    if (which.empty())
      for (int r = 0; r < hub.num_ranks(); ++r) which.push_back(r);
    std::vector<absl::StatusOr<Tensor>> out(static_cast<size_t>(hub.num_ranks()), absl::UnknownError("did not run"));
    std::vector<std::unique_ptr<absl::Notification>> done;
    std::vector<std::thread> threads;
    for (int r : which) {
      done.push_back(std::make_unique<absl::Notification>());
      absl::Notification* n = done.back().get();
      CancellationManager* cm = cms.empty() ? nullptr : cms[static_cast<size_t>(r)];
      threads.emplace_back([this, r, n, cm, &params, &inputs, &out] {
        executors[static_cast<size_t>(r)]->Run(params[static_cast<size_t>(r)], inputs[static_cast<size_t>(r)], cm,
                                               [r, n, &out](absl::StatusOr<Tensor> t) {
                                                 out[static_cast<size_t>(r)] = std::move(t);
                                                 n->Notify();
                                               });
      });
    }
    for (auto& t : threads) t.join();
    for (auto& n : done) EXPECT_TRUE(n->WaitForNotificationWithTimeout(kHang)) << "a rank never finished";
    return out;
  }
  InProcessCollectives hub;
  std::vector<std::unique_ptr<CollectiveExecutorImpl>> executors;
};

}  // namespace distflow

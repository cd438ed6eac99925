// Shared by the coordination tests (coordination_test.cc,
// coordination_agent_test.cc): task names, a heartbeat request, a task's
// state in an answer, and the coordinator's own agent on a fake clock.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/fake_clock_env.h"
#include "coordination/coordination.h"
#include "gtest/gtest.h"

namespace distflow::coordination_test {

inline const std::string kPs = "/job:ps/replica:0/task:0";
inline const std::string kChief = "/job:worker/replica:0/task:0";
inline const std::string kWorker1 = "/job:worker/replica:0/task:1";

inline proto::HeartbeatRequest Beat(const std::string& task, uint64_t incarnation, bool leaving = false) {
  proto::HeartbeatRequest r;
  r.set_task(task);
  r.set_incarnation(incarnation);
  r.set_leaving(leaving);
  return r;
}

inline proto::TaskHealth::State StateOf(const proto::HeartbeatResponse& resp, const std::string& task) {
  for (const proto::TaskHealth& h : resp.tasks())
    if (h.task() == task) return h.state();
  ADD_FAILURE() << task << " is missing from the answer";
  return proto::TaskHealth::UNKNOWN;
}

// The coordinator's own agent, driven by hand on the fake clock.
struct AgentFixture {
  FakeClockEnv env;
  CoordinationService service{{kPs, kChief, kWorker1}, absl::Seconds(10), 7, &env};
  CoordinationAgent agent{kPs,     7,        kPs, CoordinationOptions{absl::Seconds(1), absl::Seconds(10), ""},
                          nullptr, &service, &env};
  std::vector<std::pair<std::string, std::string>> deaths;  // task, message
  AgentFixture() {
    agent.SetCallbacks(
        [this](const std::string& task, const absl::Status& why) {
          EXPECT_TRUE(absl::IsUnavailable(why)) << why;
          deaths.emplace_back(task, std::string(why.message()));
        },
        nullptr);
  }
  void Beat(const std::string& task, uint64_t inc = 1, bool leaving = false) {
    proto::HeartbeatResponse resp;
    ASSERT_TRUE(service.Heartbeat(coordination_test::Beat(task, inc, leaving), &resp).ok());
  }
};

}  // namespace distflow::coordination_test

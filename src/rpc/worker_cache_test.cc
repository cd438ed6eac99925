// WorkerCache on its own: names and addresses, waiting for tasks that are
// not there, and the errors of calls it cannot make.
#include "rpc/worker_cache.h"

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/fake_clock_env.h"
#include "base/ports.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

ClusterSpec Spec(const std::string& text) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(WorkerCache, TaskNamesAreCanonicalAndSorted) {
  WorkerCache cache(Spec("worker|w0:1;w1:2,ps|p0:3"));
  EXPECT_EQ(cache.TaskNames(), (std::vector<std::string>{"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
                                                         "/job:worker/replica:0/task:1"}));
}

TEST(WorkerCache, AddressesComeFromTheSpecUnlessOverridden) {
  WorkerCache cache(Spec("worker|w0:1;w1:2,ps|p0:3"));
  EXPECT_EQ(cache.AddressOf("/job:worker/replica:0/task:1").value(), "w1:2");
  EXPECT_EQ(cache.AddressOf("/job:worker/task:1").value(), "w1:2") << "the short spelling is understood";
  cache.SetTaskAddress("/job:ps/replica:0/task:0", "p0:4444");
  EXPECT_EQ(cache.AddressOf("/job:ps/replica:0/task:0").value(), "p0:4444");
  absl::StatusOr<std::string> unknown = cache.AddressOf("/job:chief/replica:0/task:0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "chief")) << unknown.status();
  absl::StatusOr<std::string> malformed = cache.AddressOf("nonsense");
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(malformed.status().message(), "Malformed task name 'nonsense'")) << malformed.status();
}

TEST(WorkerCache, WaitingForATaskWhereNothingListensNamesItAndItsAddress) {
  const int port = PickUnusedTcpPort().value();  // nothing listens there
  const std::string address = absl::StrCat("127.0.0.1:", port);
  // Five minutes of waiting on a fake clock: its sleeps return at once.
  FakeClockEnv clock;
  WorkerCache cache(Spec("ps|" + address), "", &clock);
  absl::StatusOr<std::vector<std::string>> devices = cache.WaitForDevices({}, absl::Minutes(5));
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable) << devices.status();
  EXPECT_TRUE(absl::StrContains(devices.status().message(), "Gave up after 300 s")) << devices.status();
  EXPECT_TRUE(absl::StrContains(devices.status().message(), "/job:ps/replica:0/task:0 at " + address))
      << devices.status();
  // It asked again with backoff: 50 ms, doubling to at most a second, until
  // the five minutes were used up, and not a moment past them.
  const std::vector<absl::Duration> sleeps = clock.Sleeps();
  ASSERT_GE(sleeps.size(), 6u);
  const std::vector<absl::Duration> first = {absl::Milliseconds(50),  absl::Milliseconds(100), absl::Milliseconds(200),
                                             absl::Milliseconds(400), absl::Milliseconds(800), absl::Seconds(1)};
  EXPECT_EQ(std::vector<absl::Duration>(sleeps.begin(), sleeps.begin() + 6), first);
  absl::Duration total;
  for (absl::Duration d : sleeps) {
    EXPECT_LE(d, absl::Seconds(1));
    total += d;
  }
  EXPECT_EQ(total, absl::Minutes(5));
  // A filter that leaves the task out waits for nothing.
  absl::StatusOr<std::vector<std::string>> none = cache.WaitForDevices({"/job:worker"}, absl::Minutes(1));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST(WorkerCache, ATaskKnownToBeGoneEndsTheWaitAtOnceNamingItAndWhy) {
  const int port = PickUnusedTcpPort().value();  // nothing listens there
  const std::string address = absl::StrCat("127.0.0.1:", port);
  FakeClockEnv clock;
  WorkerCache cache(Spec(absl::StrCat("ps|", address, ",worker|127.0.0.1:", PickUnusedTcpPort().value())), "", &clock);
  std::vector<std::string> asked;
  cache.SetGoneReason([&](const std::string& task) -> std::string {
    asked.push_back(task);
    return task == "/job:ps/replica:0/task:0" ? "it left the job" : "";
  });
  absl::StatusOr<std::vector<std::string>> devices = cache.WaitForDevices({"/job:ps"}, absl::Minutes(5));
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable) << devices.status();
  EXPECT_TRUE(
      absl::StrContains(devices.status().message(), "The session needs the devices of /job:ps/replica:0/task:0 at " +
                                                        address + ": it left the job. Not waiting for it"))
      << devices.status();
  EXPECT_TRUE(clock.Sleeps().empty()) << "it waited before saying so";
  EXPECT_EQ(asked, std::vector<std::string>{"/job:ps/replica:0/task:0"}) << "only the tasks it waits for are asked";
  // A task that is not known to be gone is waited for as before.
  asked.clear();
  absl::StatusOr<std::vector<std::string>> worker = cache.WaitForDevices({"/job:worker"}, absl::Seconds(3));
  ASSERT_FALSE(worker.ok());
  EXPECT_TRUE(absl::StrContains(worker.status().message(), "Gave up after 3 s")) << worker.status();
  EXPECT_FALSE(asked.empty());
  // Without the detector, nothing is gone.
  cache.SetGoneReason(nullptr);
  absl::StatusOr<std::vector<std::string>> ps = cache.WaitForDevices({"/job:ps"}, absl::Seconds(2));
  ASSERT_FALSE(ps.ok());
  EXPECT_TRUE(absl::StrContains(ps.status().message(), "Gave up after 2 s")) << ps.status();
}

TEST(WorkerCache, ChannelsRedialAPeerThatIsDownAtLeastEverySecond) {
  // gRPC's own reconnect backoff grows to two minutes: a task that started
  // late would be found long after it came up.
  grpc::ChannelArguments args = UnlimitedChannelArguments();
  const grpc_channel_args c = args.c_channel_args();
  std::map<std::string, int> ints;
  for (size_t i = 0; i < c.num_args; ++i) {
    if (c.args[i].type == GRPC_ARG_INTEGER) ints[c.args[i].key] = c.args[i].value.integer;
  }
  ASSERT_EQ(ints.count(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS), 1u);
  EXPECT_LE(ints[GRPC_ARG_MAX_RECONNECT_BACKOFF_MS], 1000);
  EXPECT_LE(ints[GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS], ints[GRPC_ARG_MAX_RECONNECT_BACKOFF_MS]);
  EXPECT_EQ(ints[GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH], kMaxGrpcMessageBytes);
}

TEST(WorkerCache, AStopEndsTheWaitForTasksWithCancelled) {
  const int port = PickUnusedTcpPort().value();
  WorkerCache cache(Spec(absl::StrCat("ps|127.0.0.1:", port)));
  absl::Notification stop;
  stop.Notify();
  // Without the stop this waits a minute and then says Unavailable.
  absl::StatusOr<std::vector<std::string>> devices = cache.WaitForDevices({}, absl::Minutes(1), &stop);
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kCancelled) << devices.status();
}

TEST(WorkerCache, CallsItCannotMakeFailNamingWhy) {
  WorkerCache cache(Spec("ps|127.0.0.1:1"));
  absl::Notification done;
  absl::Status got;
  cache.RecvTensorAsync("nonsense", 1, "edge", nullptr, [&](absl::Status s, Tensor) {
    got = s;
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(got.code(), absl::StatusCode::kInvalidArgument) << got;
  EXPECT_TRUE(absl::StrContains(got.message(), "nonsense")) << got;
  Tensor t = Tensor::FromVector<float>({1, 2});
  absl::Status bulk = cache.FetchBulkInto("/job:ps/replica:0/task:0", 7, 1, &t, nullptr);
  EXPECT_EQ(bulk.code(), absl::StatusCode::kFailedPrecondition) << bulk;
  EXPECT_TRUE(absl::StrContains(bulk.message(), "bulk transfer is off here")) << bulk;
}

}  // namespace
}  // namespace distflow

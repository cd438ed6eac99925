#include "master/local_master.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "master/master.h"
#include "rpc/worker_cache.h"

namespace distflow {
namespace {

TEST(LocalMasterKey, LoopbackAndWildcardHostsNameOneServerPerPort) {
  EXPECT_EQ(LocalMasterKey("localhost:2222"), LocalMasterKey("127.0.0.1:2222"));
  EXPECT_EQ(LocalMasterKey("LOCALHOST:2222"), LocalMasterKey("127.0.0.1:2222"));
  EXPECT_EQ(LocalMasterKey("0.0.0.0:2222"), LocalMasterKey("localhost:2222"));
  EXPECT_EQ(LocalMasterKey("[::]:2222"), LocalMasterKey("[::1]:2222"));
  EXPECT_NE(LocalMasterKey("[::1]:2222"), LocalMasterKey("127.0.0.1:2222")) << "v4 and v6 sockets are distinct";
  EXPECT_NE(LocalMasterKey("localhost:2222"), LocalMasterKey("localhost:2223"));
  EXPECT_NE(LocalMasterKey("10.0.0.5:2222"), LocalMasterKey("localhost:2222"));
  EXPECT_EQ(LocalMasterKey("Example.com:80"), LocalMasterKey("example.com:80"));
  EXPECT_EQ(LocalMasterKey("no-port"), "");
  EXPECT_EQ(LocalMasterKey("h:99999"), "");
}

class LocalMasterRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto spec = ClusterSpec::Parse("local|127.0.0.1:1");
    ASSERT_TRUE(spec.ok()) << spec.status();
    workers_ = std::make_unique<WorkerCache>(*spec);
    master_ = std::make_unique<Master>("/job:local/replica:0/task:0", workers_.get());
    entry_ = std::make_shared<LocalMasterEntry>(master_.get());
  }
  void TearDown() override { UnregisterLocalMaster(kAddress, entry_.get()); }
  static constexpr const char* kAddress = "127.0.0.1:47123";
  std::unique_ptr<WorkerCache> workers_;
  std::unique_ptr<Master> master_;
  std::shared_ptr<LocalMasterEntry> entry_;
};

TEST_F(LocalMasterRegistryTest, FindsTheRegisteredMasterUnderItsAliasesOnly) {
  EXPECT_FALSE(LocalMasterLease::Find(kAddress).has_value());
  RegisterLocalMaster(kAddress, entry_);
  auto lease = LocalMasterLease::Find("localhost:47123");
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(lease->master(), master_.get());
  EXPECT_FALSE(LocalMasterLease::Find("localhost:47124").has_value());
  EXPECT_FALSE(LocalMasterLease::Find("10.1.1.1:47123").has_value());
}

TEST_F(LocalMasterRegistryTest, UnregisterLeavesAnotherServersEntryInPlace) {
  RegisterLocalMaster(kAddress, entry_);
  auto other = std::make_shared<LocalMasterEntry>(master_.get());
  UnregisterLocalMaster(kAddress, other.get());  // not the registered one: no effect
  EXPECT_TRUE(LocalMasterLease::Find(kAddress).has_value());
  UnregisterLocalMaster(kAddress, entry_.get());
  EXPECT_FALSE(LocalMasterLease::Find(kAddress).has_value());
}

TEST_F(LocalMasterRegistryTest, ALiveEntryIsNotReplacedAClosedOneIs) {
  RegisterLocalMaster(kAddress, entry_);
  Master other_master("/job:local/replica:0/task:0", workers_.get());
  auto other = std::make_shared<LocalMasterEntry>(&other_master);
  RegisterLocalMaster(kAddress, other);
  EXPECT_EQ(LocalMasterLease::Find(kAddress)->master(), master_.get()) << "the live first entry stays";
  entry_->Close();
  RegisterLocalMaster(kAddress, other);
  EXPECT_EQ(LocalMasterLease::Find(kAddress)->master(), &other_master) << "a closed entry gives way";
  UnregisterLocalMaster(kAddress, other.get());
}

TEST_F(LocalMasterRegistryTest, CloseRefusesNewLeasesAndWaitIdleWaitsForOldOnes) {
  RegisterLocalMaster(kAddress, entry_);
  auto lease = LocalMasterLease::Find(kAddress);
  ASSERT_TRUE(lease.has_value());
  entry_->Close();
  EXPECT_FALSE(LocalMasterLease::Find(kAddress).has_value()) << "a closed entry gives no new leases";
  absl::Notification idle;
  std::thread waiter([&] {
    entry_->WaitIdle();
    idle.Notify();
  });
  EXPECT_FALSE(idle.WaitForNotificationWithTimeout(absl::Milliseconds(200))) << "a lease is still out";
  auto moved = std::move(*lease);  // moving a lease does not return it
  lease.reset();
  EXPECT_FALSE(idle.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  { auto gone = std::move(moved); }
  EXPECT_TRUE(idle.WaitForNotificationWithTimeout(absl::Seconds(10)));
  waiter.join();
}

}  // namespace
}  // namespace distflow

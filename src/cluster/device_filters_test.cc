#include "cluster/device_filters.h"

#include "gtest/gtest.h"

namespace distflow {
namespace {

TEST(DeviceFilters, NoFiltersPassEverything) { EXPECT_TRUE(PassesFilters("/job:ps/replica:0/task:0", {})); }

TEST(DeviceFilters, AFilterMatchesTheTasksItNames) {
  const std::vector<std::string> filters = {"/job:ps", "/job:worker/task:3"};
  EXPECT_TRUE(PassesFilters("/job:ps/replica:0/task:0", filters));
  EXPECT_TRUE(PassesFilters("/job:ps/replica:0/task:7", filters));
  EXPECT_TRUE(PassesFilters("/job:worker/replica:0/task:3", filters));
  EXPECT_FALSE(PassesFilters("/job:worker/replica:0/task:1", filters));
  EXPECT_FALSE(PassesFilters("/job:chief/replica:0/task:0", filters));
  // Both spellings of a task are understood.
  EXPECT_TRUE(PassesFilters("/job:worker/task:3", filters));
}

TEST(DeviceFilters, UnparsableNamesMatchNothing) {
  EXPECT_FALSE(PassesFilters("/job:ps/replica:0/task:0", {"not a device"}));
  EXPECT_FALSE(PassesFilters("garbage", {"/job:ps"}));
}

}  // namespace
}  // namespace distflow

#include "cluster/device_name.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::HasSubstr;

DeviceName P(absl::string_view s) {
  auto d = DeviceName::Parse(s);
  EXPECT_TRUE(d.ok()) << s << ": " << d.status();
  return d.ok() ? *d : DeviceName();
}

TEST(DeviceName, ParsesFields) {
  DeviceName d = P("/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(d.has_job && d.has_replica && d.has_task && d.has_type && d.has_id);
  EXPECT_EQ(d.job, "ps");
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.task, 1);
  EXPECT_EQ(d.type, "CPU");
  EXPECT_EQ(d.id, 0);
  EXPECT_TRUE(d.IsFullySpecified());

  DeviceName w = P("/device:GPU:*");
  EXPECT_TRUE(w.has_type);
  EXPECT_FALSE(w.has_id);
  EXPECT_FALSE(w.has_job || w.has_replica || w.has_task);
  EXPECT_FALSE(w.IsFullySpecified());
}

TEST(DeviceName, ParseAndPrintTable) {
  struct Case {
    const char* input;
    const char* canonical;
  };
  const std::vector<Case> cases = {
      {"", ""},
      {"/", ""},
      {"/job:ps/replica:0/task:1/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"},
      {"/device:CPU:0/task:1/job:ps/replica:0", "/job:ps/replica:0/task:1/device:CPU:0"},
      {"/cpu:0", "/device:CPU:0"},
      {"/CPU:0", "/device:CPU:0"},
      {"/gpu:1", "/device:GPU:1"},
      {"/GPU:3", "/device:GPU:3"},
      {"/device:GPU:1", "/device:GPU:1"},
      {"/device:gpu:1", "/device:GPU:1"},
      {"/job:ps/cpu:0", "/job:ps/device:CPU:0"},
      {"/device:CPU:*", "/device:CPU:*"},
      {"/device:CPU", "/device:CPU:*"},
      {"/device:*:2", "/device:*:2"},
      {"/device:*:*", ""},
      {"/gpu:*", "/device:GPU:*"},
      {"/task:*", ""},
      {"/job:*/replica:*", ""},
      {"/task:3", "/task:3"},
      {"/job:worker_2", "/job:worker_2"},
      {"/device:TPU_SYSTEM:0", "/device:TPU_SYSTEM:0"},
      {"/task:1/task:1", "/task:1"},
      {"/cpu:0/device:CPU:0", "/device:CPU:0"},
      {"/replica:2147483647", "/replica:2147483647"},
  };
  for (const Case& c : cases) {
    auto d = DeviceName::Parse(c.input);
    ASSERT_TRUE(d.ok()) << c.input << ": " << d.status();
    EXPECT_EQ(d->ToString(), c.canonical) << c.input;
    auto again = DeviceName::Parse(d->ToString());
    ASSERT_TRUE(again.ok()) << d->ToString();
    EXPECT_EQ(*again, *d) << c.input;
    EXPECT_EQ(again->ToString(), c.canonical);
  }
}

TEST(DeviceName, RejectsInvalidTable) {
  struct Case {
    const char* input;
    const char* expected_substring;
  };
  const std::vector<Case> cases = {
      {"/job:ps/task:x", "'task:x'"},
      {"/foo:1", "'foo:1'"},
      {"/task:-1", "'task:-1'"},
      {"/replica:+1", "'replica:+1'"},
      {"/device:CPU:-2", "'device:CPU:-2'"},
      {"/cpu:-1", "'cpu:-1'"},
      {"/task:1/task:2", "conflicting task"},
      {"/job:a/job:b", "conflicting job"},
      {"/cpu:0/gpu:0", "conflicting device"},
      {"/device:CPU:0/device:CPU:1", "conflicting device"},
      {"job:ps", "must start with '/'"},
      {"/job:ps/", "empty component"},
      {"//job:ps", "empty component"},
      {"/job:", "'job:'"},
      {"/job:1ps", "'job:1ps'"},
      {"/job:p s", "'job:p s'"},
      {"/task", "expected KEY:VALUE"},
      {"/device:", "'device:'"},
      {"/device:CPU:0:1", "'device:CPU:0:1'"},
      {"/device:C-PU:0", "'device:C-PU:0'"},
      {"/task:99999999999", "'task:99999999999'"},
      {"/task:", "'task:'"},
      {"/cpu", "expected KEY:VALUE"},
  };
  for (const Case& c : cases) {
    auto d = DeviceName::Parse(c.input);
    ASSERT_FALSE(d.ok()) << "accepted: " << c.input;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), HasSubstr(c.expected_substring)) << c.input;
    if (c.input[0] == '/') {
      EXPECT_THAT(d.status().message(), HasSubstr(std::string("'") + c.input + "'"));
    }
  }
  const std::string huge = "/job:" + std::string(1 << 20, '!');
  auto d = DeviceName::Parse(huge);
  ASSERT_FALSE(d.ok());
  EXPECT_LT(d.status().message().size(), 500u);
}

TEST(DeviceName, StrictMerge) {
  DeviceName d = P("/job:ps/device:CPU:*");
  ASSERT_TRUE(d.MergeFrom(P("/task:1/device:CPU:0")).ok());
  EXPECT_EQ(d.ToString(), "/job:ps/task:1/device:CPU:0");
  ASSERT_TRUE(d.MergeFrom(P("")).ok());
  EXPECT_EQ(d.ToString(), "/job:ps/task:1/device:CPU:0");

  struct Case {
    const char* a;
    const char* b;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{{"/job:ps", "/job:worker", "job"},
                                         {"/replica:0", "/replica:1", "replica"},
                                         {"/task:0", "/task:2", "task"},
                                         {"/cpu:0", "/gpu:0", "device type"},
                                         {"/gpu:0", "/gpu:1", "device id"}}) {
    DeviceName x = P(c.a);
    absl::Status s = x.MergeFrom(P(c.b));
    ASSERT_FALSE(s.ok()) << c.a << " + " << c.b;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(std::string("conflicting ") + c.field));
    EXPECT_THAT(s.message(), HasSubstr(P(c.a).ToString()));
    EXPECT_THAT(s.message(), HasSubstr(P(c.b).ToString()));
    EXPECT_EQ(x, P(c.a)) << "unchanged on error";
  }
}

TEST(DeviceName, MergeWithSoftPlacement) {
  DeviceName d = P("/job:ps/device:GPU:0");
  ASSERT_TRUE(d.MergeFrom(P("/task:1/device:CPU:0"), true).ok());
  EXPECT_EQ(d.ToString(), "/job:ps/task:1");
  d = P("/device:GPU:0");
  ASSERT_TRUE(d.MergeFrom(P("/device:GPU:1"), true).ok());
  EXPECT_EQ(d.ToString(), "/device:GPU:*");
  d = P("/job:ps");
  EXPECT_FALSE(d.MergeFrom(P("/job:w"), true).ok());
}

TEST(DeviceName, InnerScopeMergeTable) {
  struct Case {
    const char* outer;
    const char* inner;
    const char* result;
  };
  const std::vector<Case> cases = {
      {"/job:ps", "/task:1", "/job:ps/task:1"},      {"/job:ps/task:0", "/task:1", "/job:ps/task:1"},
      {"/gpu:0", "/cpu:0", "/device:CPU:0"},         {"/gpu:1", "/device:CPU", "/device:CPU:*"},
      {"/gpu:1", "/device:GPU", "/device:GPU:1"},    {"/gpu:1", "/device:*:3", "/device:GPU:3"},
      {"/job:ps/cpu:0", "", "/job:ps/device:CPU:0"}, {"", "/job:w/replica:1", "/job:w/replica:1"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(DeviceName::MergeInner(P(c.outer), P(c.inner)).ToString(), c.result) << c.outer << " <- " << c.inner;
  }
}

TEST(DeviceName, MatchingTable) {
  struct Case {
    const char* spec;
    const char* device;
    bool matches;
    bool compatible;
  };
  const char* full = "/job:ps/replica:0/task:1/device:CPU:0";
  const std::vector<Case> cases = {
      {"", full, true, true},
      {"/job:ps", full, true, true},
      {"/job:worker", full, false, false},
      {"/device:CPU:*", full, true, true},
      {"/device:GPU:*", full, false, false},
      {"/device:*:0", full, true, true},
      {"/task:1/cpu:0", full, true, true},
      {"/task:2", full, false, false},
      {full, full, true, true},
      {"/job:ps", "/task:1", false, true},  // device lacks the job
      {"/cpu:0", "/gpu:0", false, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(P(c.spec).IsSpecificationOf(P(c.device)), c.matches) << c.spec << " vs " << c.device;
    EXPECT_EQ(P(c.spec).Matches(P(c.device)), c.matches);
    EXPECT_EQ(P(c.spec).IsCompatibleWith(P(c.device)), c.compatible);
    EXPECT_EQ(P(c.device).IsCompatibleWith(P(c.spec)), c.compatible);
  }
}

TEST(DeviceName, AddressSpaceAndEquality) {
  DeviceName d = P("/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(d.AddressSpace().ToString(), "/job:ps/replica:0/task:1");
  DeviceName a, b;
  a.task = 5;  // unset fields' values are ignored by ==
  EXPECT_EQ(a, b);
  b.has_task = true;
  EXPECT_NE(a, b);
}

TEST(JobName, Validity) {
  EXPECT_TRUE(IsValidJobName("ps"));
  EXPECT_TRUE(IsValidJobName("Worker_2"));
  EXPECT_FALSE(IsValidJobName(""));
  EXPECT_FALSE(IsValidJobName("_ps"));
  EXPECT_FALSE(IsValidJobName("2ps"));
  EXPECT_FALSE(IsValidJobName("p-s"));
}

}  // namespace
}  // namespace distflow

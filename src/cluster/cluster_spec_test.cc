#include "distflow/cluster_spec.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ClusterSpec, ParsesFlagForm) {
  auto spec = ClusterSpec::Parse("ps|h0:2222;h1:2222,worker|h2:2222");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->jobs(), ElementsAre("ps", "worker"));
  EXPECT_EQ(spec->num_tasks("ps"), 2);
  EXPECT_EQ(spec->num_tasks("worker"), 1);
  EXPECT_EQ(spec->num_tasks("nope"), 0);
  EXPECT_THAT(spec->task_indices("ps"), ElementsAre(0, 1));
  EXPECT_EQ(*spec->task_address("ps", 1), "h1:2222");
  EXPECT_TRUE(spec->HasTask("worker", 0));
  EXPECT_FALSE(spec->HasTask("worker", 1));
  EXPECT_FALSE(spec->HasTask("chief", 0));
  EXPECT_THAT(spec->AllTaskNames(),
              ElementsAre("/job:ps/replica:0/task:0", "/job:ps/replica:0/task:1", "/job:worker/replica:0/task:0"));
}

TEST(ClusterSpec, FlagFormVariants) {
  auto plain = ClusterSpec::Parse("ps|a:1;b:2,wk|c:3");
  ASSERT_TRUE(plain.ok()) << plain.status();
  for (const char* text :
       {"'ps|a:1;b:2','wk|c:3'", "\"ps|a:1;b:2\",\"wk|c:3\"", "  ps|a:1;b:2 , wk|c:3\n", "wk|c:3,ps|a:1;b:2"}) {
    auto spec = ClusterSpec::Parse(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(*spec, *plain) << text;
  }
  auto empty_job = ClusterSpec::Parse("ps|,worker|a:1");
  ASSERT_TRUE(empty_job.ok()) << empty_job.status();
  EXPECT_EQ(empty_job->num_tasks("ps"), 0);
  EXPECT_EQ(*empty_job->ToFlagString(), "ps|,worker|a:1");
}

TEST(ClusterSpec, ParsesJson) {
  auto spec = ClusterSpec::Parse(
      R"(  {"ps": ["h0:2222"], "worker": {"0": "a:1", "3": "b:2"},
            "empty": [], "empty2": {}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->jobs(), ElementsAre("empty", "empty2", "ps", "worker"));
  EXPECT_THAT(spec->task_indices("worker"), ElementsAre(0, 3));
  EXPECT_EQ(spec->num_tasks("worker"), 2);
  EXPECT_EQ(spec->num_tasks("empty2"), 0);
  EXPECT_EQ(*spec->task_address("worker", 3), "b:2");
  EXPECT_THAT(spec->AllTaskNames(),
              ElementsAre("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:3"));
  EXPECT_EQ(spec->ToJson(), R"({"empty":[],"empty2":[],"ps":["h0:2222"],)"
                            R"("worker":{"0":"a:1","3":"b:2"}})");
  auto flag = spec->ToFlagString();
  EXPECT_FALSE(flag.ok());
  EXPECT_THAT(flag.status().message(), HasSubstr("'worker' is sparse"));
}

TEST(ClusterSpec, RoundTrips) {
  for (const char* text : {"ps|h0:2222;h1:2222,worker|h2:2222", "a|[::1]:0", "x|", "ps|localhost:0",
                           R"({"w": {"2": "a:1", "5": "b:2"}, "ps": ["c:3", "d:4"]})",
                           R"({"chief": ["example.com:2222"], "w": {"1": "127.0.0.1:1"}})"}) {
    auto spec = ClusterSpec::Parse(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    auto from_json = ClusterSpec::ParseJson(spec->ToJson());
    ASSERT_TRUE(from_json.ok()) << spec->ToJson() << ": " << from_json.status();
    EXPECT_EQ(*from_json, *spec) << text;
    auto flag = spec->ToFlagString();
    if (!flag.ok()) continue;  // sparse
    auto from_flag = ClusterSpec::ParseFlagForm(*flag);
    ASSERT_TRUE(from_flag.ok()) << *flag << ": " << from_flag.status();
    EXPECT_EQ(*from_flag, *spec) << text;
  }
}

TEST(ClusterSpec, FromJobs) {
  auto spec = ClusterSpec::FromJobs({{"ps", {{0, "a:1"}}}, {"w", {{4, "b:2"}}}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ToJson(), R"({"ps":["a:1"],"w":{"4":"b:2"}})");
  EXPECT_FALSE(ClusterSpec::FromJobs({}).ok());
  EXPECT_FALSE(ClusterSpec::FromJobs({{"ps", {{-1, "a:1"}}}}).ok());
  EXPECT_FALSE(ClusterSpec::FromJobs({{"ps", {{0, "a"}}}}).ok());
  EXPECT_FALSE(ClusterSpec::FromJobs({{"1ps", {}}}).ok());
}

struct BadCase {
  std::string text;
  std::string expected_substring;
};

TEST(ClusterSpec, RejectsMalformedSpecs) {
  const std::vector<BadCase> cases = {
      {"", "empty spec"},
      {"   ", "empty spec"},
      {"{}", "empty spec"},
      {"ps", "'ps' has no '|'"},
      {"ps|a:1,,w|b:2", "empty job entry"},
      {"ps|a:1,", "empty job entry"},
      {"ps|a:1,ps|b:2", "duplicate job 'ps'"},
      {"1ps|a:1", "bad job name '1ps'"},
      {"p-s|a:1", "bad job name 'p-s'"},
      {"|a:1", "bad job name ''"},
      {"ps|a:1;;b:2", "job 'ps' task 1: invalid address ''"},
      {"ps|a:1;b", "job 'ps' task 1: invalid address 'b': missing port"},
      {"ps|a:x", "port 'x'"},
      {"ps|a:65536", "port '65536'"},
      {"ps|a:-1", "port '-1'"},
      {"ps|a:123456", "port '123456'"},
      {"ps|h:22/x", "path after the port"},
      {"ps|:22", "empty host"},
      {"ps|[::1:22", "unbalanced '['"},
      {"ps|::1]:22", "unbalanced brackets"},
      {"ps|[]:22", "empty host"},
      {"ps|[::1]", "missing port"},
      {"ps|[::1]22", "expected ':' after ']'"},
      {"ps|::1:22", "too many ':'"},
      {"ps|a b:22", "whitespace"},
      {"ps|a:22 ;b:1", "whitespace"},
      {"ps|a:", "missing port"},
      {"ps|a:1|b:2", "'a:1|b:2'"},
      {"{", "invalid JSON"},
      {"{\"ps\": 3}", "job 'ps': must be a list"},
      {"{\"ps\": [1]}", "task 0 is not a string"},
      {"{\"ps\": {\"0\": 1}}", "task '0' is not a string"},
      {"{\"ps\": {\"x\": \"a:1\"}}", "task key 'x'"},
      {"{\"ps\": {\"-1\": \"a:1\"}}", "task key '-1'"},
      {"{\"ps\": {\"99999999999\": \"a:1\"}}", "task key '99999999999'"},
      {"{\"ps\": {\"0\": \"a:1\", \"00\": \"b:2\"}}", "two addresses for task 0"},
      {"{\"ps\": [], \"ps\": []}", "duplicate job or task"},
      {"{\"ps\": [], \"ps\": []}", "'ps'"},
      {"{\"ps\": {\"1\": \"a:1\", \"1\": \"b:1\"}}", "duplicate job or task"},
      {"{\"bad name\": []}", "bad job name 'bad name'"},
      {"{\"ps\": [\"a:1\"]} extra", "invalid JSON"},
      {"{\"ps\": [\"a:99999\"]}", "job 'ps' task 0"},
      {"{\"ps\": [\"a\\u0000:1\"]}", "invalid character in host"},
  };
  for (const BadCase& c : cases) {
    auto spec = ClusterSpec::Parse(c.text);
    ASSERT_FALSE(spec.ok()) << "accepted: " << c.text;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(spec.status().message(), HasSubstr(c.expected_substring)) << c.text;
  }
  // A JSON document that is not an object goes to the flag parser via Parse,
  // and is rejected by ParseJson directly.
  EXPECT_FALSE(ClusterSpec::Parse("[1,2]").ok());
  auto list = ClusterSpec::ParseJson("[1,2]");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("must be an object"));
  EXPECT_FALSE(ClusterSpec::ParseJson("ps|a:1").ok());
}

TEST(ClusterSpec, SurvivesHugeAndDeepInput) {
  const std::string huge_flag(1 << 20, 'x');
  auto s1 = ClusterSpec::Parse(huge_flag);
  ASSERT_FALSE(s1.ok());
  EXPECT_LT(s1.status().message().size(), 400u);  // offending part is shortened
  EXPECT_FALSE(ClusterSpec::Parse("{" + std::string(1 << 20, '[')).ok());
  std::string nested;
  for (int i = 0; i < 20000; ++i) nested += "{\"a\":";
  EXPECT_FALSE(ClusterSpec::Parse(nested).ok());
  EXPECT_FALSE(ClusterSpec::Parse("{\"ps\": [\"" + huge_flag + "\"]}").ok());
  auto s2 = ClusterSpec::Parse("{\"ps\": [\"" + huge_flag + "\"], }}");
  ASSERT_FALSE(s2.ok());
  EXPECT_LT(s2.status().message().size(), 400u);
  std::string many = "w|";
  for (int i = 0; i < 10000; ++i) many += (i ? ";h:" : "h:") + std::to_string(i);
  auto big = ClusterSpec::Parse(many);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->num_tasks("w"), 10000);
  EXPECT_EQ(*big->ToFlagString(), many);
}

TEST(ClusterSpec, ValidateTask) {
  auto spec = ClusterSpec::Parse(R"({"ps": ["a:1", "b:2"], "w": {"1": "c:3",
                                     "4": "d:4"}, "e": []})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->ValidateTask("ps", 1).ok());
  EXPECT_TRUE(spec->ValidateTask("w", 4).ok());
  auto s = spec->ValidateTask("worker", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'worker' is not in the cluster"));
  EXPECT_THAT(s.message(), HasSubstr("jobs are: e, ps, w"));
  s = spec->ValidateTask("ps", 2);
  EXPECT_THAT(s.message(), HasSubstr("task_index 2"));
  EXPECT_THAT(s.message(), HasSubstr("valid indices: 0..1"));
  s = spec->ValidateTask("w", 0);
  EXPECT_THAT(s.message(), HasSubstr("valid indices: 1, 4"));
  s = spec->ValidateTask("ps", -1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = spec->ValidateTask("e", 0);
  EXPECT_THAT(s.message(), HasSubstr("no tasks"));
  EXPECT_FALSE(spec->task_address("w", 0).ok());
  EXPECT_FALSE(spec->task_address("zz", 0).ok());
  EXPECT_FALSE(ClusterSpec().ValidateTask("ps", 0).ok());
}

TEST(SplitHostPort, AcceptsAndSplits) {
  struct Case {
    const char* address;
    const char* host;
    int port;
  };
  for (const Case& c : std::vector<Case>{{"127.0.0.1:2222", "127.0.0.1", 2222},
                                         {"example.com:2222", "example.com", 2222},
                                         {"localhost:0", "localhost", 0},
                                         {"[::1]:2222", "::1", 2222},
                                         {"my_host-1:65535", "my_host-1", 65535},
                                         {"[fe80::1]:80", "fe80::1", 80}}) {
    auto hp = SplitHostPort(c.address);
    ASSERT_TRUE(hp.ok()) << c.address << ": " << hp.status();
    EXPECT_EQ(hp->first, c.host);
    EXPECT_EQ(hp->second, c.port);
  }
}

}  // namespace
}  // namespace distflow

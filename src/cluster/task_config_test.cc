#include "distflow/task_config.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace distflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// The environment as a map: no test sets a real variable.
EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Files in memory, for --cluster_config.
class FileEnv : public EnvWrapper {
 public:
  FileEnv() : EnvWrapper(Env::Default()) {}
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return it->second;
  }
  std::map<std::string, std::string> files;
};

constexpr char kSpec[] = "ps|h0:2222,worker|h1:2222;h2:2222;h3:2222";
const std::string kConfigPs1 = R"({"cluster": {"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222", "h3:2222"]},
                                  "task": {"type": "worker", "index": 1}})";

TaskConfigFlags Flags(std::string spec, std::string job = "", std::string index = "") {
  TaskConfigFlags f;
  f.cluster_spec = std::move(spec);
  f.job_name = std::move(job);
  f.task_index = std::move(index);
  return f;
}

// The error message of resolving `flags` in `env`; "" if it resolved.
std::string ErrorOf(const TaskConfigFlags& flags, std::map<std::string, std::string> env = {}) {
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(flags, FakeEnv(std::move(env)));
  if (t.ok()) return "";
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
  return std::string(t.status().message());
}

// "/job:J/task:I" of a resolved task, or the error.
std::string TaskOf(const TaskConfigFlags& flags, std::map<std::string, std::string> env = {}) {
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(flags, FakeEnv(std::move(env)));
  if (!t.ok()) return std::string(t.status().message());
  return absl::StrCat("/job:", t->job, "/task:", t->task_index);
}

TEST(TaskConfig, FlagsAloneNameTheTask) {
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(Flags(kSpec, "worker", "2"), FakeEnv({}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->job, "worker");
  EXPECT_EQ(t->task_index, 2);
  EXPECT_EQ(t->cluster.num_tasks("worker"), 3);
  EXPECT_EQ(t->placed_by, "");
}

TEST(TaskConfig, TaskIdIsAnAliasThatMustAgree) {
  TaskConfigFlags f = Flags(kSpec, "worker");
  f.task_id = "1";
  EXPECT_EQ(TaskOf(f), "/job:worker/task:1");
  f.task_index = "1";
  EXPECT_EQ(TaskOf(f), "/job:worker/task:1");
  f.task_index = "0";
  EXPECT_EQ(ErrorOf(f), "--task_index=0 and --task_id=1 disagree; --task_id is an alias, pass one of them");
}

TEST(TaskConfig, IndexFlagsMustBeWholeNonNegativeNumbers) {
  EXPECT_EQ(ErrorOf(Flags(kSpec, "ps", "x")), "--task_index=x is not a whole number");
  EXPECT_EQ(ErrorOf(Flags(kSpec, "ps", "1.5")), "--task_index=1.5 is not a whole number");
  EXPECT_THAT(ErrorOf(Flags(kSpec, "ps", "-1")), HasSubstr("negative; task indices start at 0"));
  EXPECT_THAT(ErrorOf(Flags(kSpec, "ps", "9999999")), HasSubstr("out of range"));
}

TEST(TaskConfig, DistflowConfigAloneNamesClusterAndTask) {
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(TaskConfigFlags(), FakeEnv({{"DISTFLOW_CONFIG", kConfigPs1}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->job, "worker");
  EXPECT_EQ(t->task_index, 1);
  EXPECT_EQ(*t->cluster.task_address("worker", 2), "h3:2222");
  // An empty variable is no configuration.
  EXPECT_EQ(ErrorOf(TaskConfigFlags(), {{"DISTFLOW_CONFIG", ""}}),
            "no cluster: pass --cluster_spec, --cluster_config or DISTFLOW_CONFIG");
}

TEST(TaskConfig, SourcesThatAgreeAreAccepted) {
  // The same cluster in flag form and JSON, the same task: what distflow-launch passes.
  EXPECT_EQ(TaskOf(Flags(kSpec, "worker", "1"), {{"DISTFLOW_CONFIG", kConfigPs1}}), "/job:worker/task:1");
}

TEST(TaskConfig, SourcesThatDisagreeAreNamed) {
  EXPECT_EQ(ErrorOf(Flags("", "ps"), {{"DISTFLOW_CONFIG", kConfigPs1}}),
            "--job_name and DISTFLOW_CONFIG disagree on the job (ps vs worker); pass one of them");
  EXPECT_EQ(ErrorOf(Flags("", "", "2"), {{"DISTFLOW_CONFIG", kConfigPs1}}),
            "--task_index and DISTFLOW_CONFIG disagree on the task index (2 vs 1); pass one of them");
  EXPECT_THAT(ErrorOf(Flags("ps|h0:2222,worker|h1:2222"), {{"DISTFLOW_CONFIG", kConfigPs1}}),
              HasSubstr("--cluster_spec and DISTFLOW_CONFIG disagree on the cluster"));
}

TEST(TaskConfig, ClusterConfigFileIsASourceLikeTheOthers) {
  FileEnv files;
  files.files["/cfg.json"] = kConfigPs1;
  TaskConfigFlags f;
  f.cluster_config = "/cfg.json";
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(f, FakeEnv({}), {}, &files);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->job, "worker");
  f.job_name = "ps";
  t = ResolveTaskConfig(f, FakeEnv({}), {}, &files);
  EXPECT_EQ(t.status().message(),
            "--job_name and --cluster_config disagree on the job (ps vs worker); pass one of them");
  f.cluster_config = "/missing.json";
  t = ResolveTaskConfig(f, FakeEnv({}), {}, &files);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(t.status().message(), "--cluster_config: /missing.json: no such file");
}

TEST(TaskConfig, MalformedConfigDocumentsAreNamed) {
  EXPECT_THAT(ErrorOf({}, {{"DISTFLOW_CONFIG", "{"}}), HasSubstr("DISTFLOW_CONFIG is not valid JSON"));
  EXPECT_THAT(ErrorOf({}, {{"DISTFLOW_CONFIG", R"({"cluster": {"ps": ["a:1"]}})"}}),
              HasSubstr("DISTFLOW_CONFIG needs {\"cluster\""));
  EXPECT_THAT(ErrorOf({}, {{"DISTFLOW_CONFIG", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps"}})"}}),
              HasSubstr("DISTFLOW_CONFIG's task needs a string \"type\" and a number \"index\""));
  EXPECT_EQ(ErrorOf({}, {{"DISTFLOW_CONFIG", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0.7}})"}}),
            "DISTFLOW_CONFIG's task index 0.7 is not a whole number");
  EXPECT_EQ(
      ErrorOf({}, {{"DISTFLOW_CONFIG", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 1e20}})"}}),
      "DISTFLOW_CONFIG's task index 1e+20 is out of range");
  EXPECT_THAT(ErrorOf({}, {{"DISTFLOW_CONFIG", R"({"cluster": {"ps": ["a"]}, "task": {"type": "ps", "index": 0}})"}}),
              HasSubstr("DISTFLOW_CONFIG: bad cluster:"));
}

TEST(TaskConfig, MissingPartsAreNamed) {
  EXPECT_EQ(ErrorOf(Flags("", "ps", "0")), "no cluster: pass --cluster_spec, --cluster_config or DISTFLOW_CONFIG");
  EXPECT_THAT(ErrorOf(Flags(kSpec, "", "0")), HasSubstr("missing --job_name"));
  EXPECT_THAT(ErrorOf(Flags(kSpec, "ps")), HasSubstr("missing --task_index"));
  EXPECT_THAT(ErrorOf(Flags("ps|nohost", "ps", "0")), HasSubstr("bad --cluster_spec: "));
}

TEST(TaskConfig, EveryTaskNeedsItsOwnFixedAddress) {
  EXPECT_EQ(ErrorOf(Flags("ps|a:1;a:1", "ps", "0")),
            "/job:ps/replica:0/task:0 and /job:ps/replica:0/task:1 have the same address a:1: give each task its own");
  EXPECT_THAT(ErrorOf(Flags("ps|a:0", "ps", "0")), HasSubstr("/job:ps/replica:0/task:0 has port 0 (a:0)"));
}

TEST(TaskConfig, ATaskNotInTheClusterNamesTheFlagThatChoseIt) {
  EXPECT_THAT(ErrorOf(Flags(kSpec, "chief", "0")), HasSubstr("bad --job_name: job_name 'chief' is not in the cluster"));
  EXPECT_THAT(ErrorOf(Flags(kSpec, "worker", "3")), HasSubstr("bad --task_index: task_index 3 is not a task"));
}

TEST(TaskConfig, DefaultsApplyOnlyWhereNothingElseSays) {
  TaskConfigDefaults d;
  d.cluster = *ClusterSpec::Parse("ps|d:1,worker|d:2");
  d.job = "worker";
  d.task_index = 0;
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig({}, FakeEnv({}), d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->job, "worker");
  EXPECT_EQ(*t->cluster.task_address("worker", 0), "d:2");
  // A cluster, job or index that a source gives wins over the default.
  t = ResolveTaskConfig(Flags(kSpec, "", "2"), FakeEnv({}), d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->task_index, 2);
  EXPECT_EQ(*t->cluster.task_address("worker", 2), "h3:2222");
  t = ResolveTaskConfig({}, FakeEnv({{"DISTFLOW_CONFIG", kConfigPs1}}), d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->task_index, 1);
  EXPECT_EQ(t->cluster.num_tasks("worker"), 3);
}

TEST(JobLayout, ParsesJobsInRankOrder) {
  absl::StatusOr<JobLayout> l = ParseJobLayout("worker:3,ps:1");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_THAT(*l, ElementsAre(Pair("worker", 3), Pair("ps", 1)));
}

TEST(JobLayout, RejectsMalformedLayouts) {
  for (const char* bad : {"", "ps", "ps:", "ps:0", "ps:-1", "ps:x", "ps:1,", "ps:1:2", "ps:1;worker:2"}) {
    absl::StatusOr<JobLayout> l = ParseJobLayout(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_THAT(l.status().message(), HasSubstr(absl::StrCat("--job_layout=", bad, ": "))) << bad;
    EXPECT_THAT(l.status().message(), HasSubstr("e.g. --job_layout=ps:1,worker:3")) << bad;
  }
  EXPECT_THAT(ParseJobLayout("1ps:1").status().message(), HasSubstr("bad job name '1ps'"));
  EXPECT_THAT(ParseJobLayout(":1").status().message(), HasSubstr("bad job name ''"));
  EXPECT_THAT(ParseJobLayout("ps:1,worker:2,ps:1").status().message(), HasSubstr("job 'ps' appears twice"));
}

TaskConfigFlags Layout(std::string layout, std::string spec = kSpec) {
  TaskConfigFlags f = Flags(std::move(spec));
  f.job_layout = std::move(layout);
  return f;
}

TEST(RankDerivation, RanksFollowTheLayoutsOrder) {
  const TaskConfigFlags f = Layout("ps:1,worker:3");
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "0"}}), "/job:ps/task:0");
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "1"}}), "/job:worker/task:0");
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "3"}}), "/job:worker/task:2");
  const TaskConfigFlags reversed = Layout("worker:3,ps:1");
  EXPECT_EQ(TaskOf(reversed, {{"SLURM_PROCID", "0"}}), "/job:worker/task:0");
  EXPECT_EQ(TaskOf(reversed, {{"SLURM_PROCID", "3"}}), "/job:ps/task:0");
}

TEST(RankDerivation, OpenMpiAndPmiRanksWorkToo) {
  const TaskConfigFlags f = Layout("ps:1,worker:3");
  EXPECT_EQ(TaskOf(f, {{"OMPI_COMM_WORLD_RANK", "2"}}), "/job:worker/task:1");
  EXPECT_EQ(TaskOf(f, {{"PMI_RANK", "0"}}), "/job:ps/task:0");
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(f, FakeEnv({{"OMPI_COMM_WORLD_RANK", "2"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->placed_by, "--job_layout=ps:1,worker:3 with OMPI_COMM_WORLD_RANK=2");
  // srun with PMI sets two variables; they agree.
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "3"}, {"PMI_RANK", "3"}}), "/job:worker/task:2");
  EXPECT_EQ(ErrorOf(f, {{"SLURM_PROCID", "1"}, {"PMI_RANK", "2"}}),
            "SLURM_PROCID=1 and PMI_RANK=2 disagree on this process's rank; unset one of them");
  EXPECT_THAT(ErrorOf(f, {{"SLURM_PROCID", "one"}}), HasSubstr("SLURM_PROCID=one is not a rank"));
  EXPECT_THAT(ErrorOf(f, {{"PMI_RANK", "-1"}}), HasSubstr("PMI_RANK=-1 is not a rank"));
}

TEST(RankDerivation, ARankBeyondTheLayoutIsAnError) {
  EXPECT_EQ(ErrorOf(Layout("ps:1,worker:3"), {{"SLURM_PROCID", "4"}}),
            "SLURM_PROCID=4 is beyond --job_layout=ps:1,worker:3, which places ranks 0..3; start 4 processes or "
            "extend the layout");
}

TEST(RankDerivation, TheLayoutMustMatchTheCluster) {
  const std::map<std::string, std::string> rank0 = {{"SLURM_PROCID", "0"}};
  EXPECT_EQ(ErrorOf(Layout("ps:1,worker:2"), rank0),
            "--job_layout=ps:1,worker:2 has 2 worker tasks but --cluster_spec has 3; make them agree");
  EXPECT_EQ(ErrorOf(Layout("ps:1"), rank0),
            "--job_layout=ps:1 leaves out job 'worker' (3 tasks in --cluster_spec); add worker:3");
  EXPECT_THAT(ErrorOf(Layout("ps:1,worker:3,chief:1"), rank0),
              HasSubstr("names job 'chief', which --cluster_spec does not have; its jobs are: ps, worker"));
  // The cluster may come from DISTFLOW_CONFIG, which is then named.
  TaskConfigFlags f = Layout("ps:2,worker:3", "");
  EXPECT_EQ(ErrorOf(f, {{"SLURM_PROCID", "0"}, {"DISTFLOW_CONFIG", kConfigPs1}}),
            "--job_layout=ps:2,worker:3 has 2 ps tasks but DISTFLOW_CONFIG has 1; make them agree");
}

TEST(RankDerivation, ALayoutNeedsARankVariable) {
  EXPECT_EQ(ErrorOf(Layout("ps:1,worker:3")),
            "--job_layout=ps:1,worker:3 places tasks by rank, but none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, "
            "PMI_RANK is set; start the program under srun or mpirun, or pass --job_name and --task_index instead");
  // A rank variable without a layout is ignored (any program inside an
  // allocation sees SLURM_PROCID).
  EXPECT_EQ(TaskOf(Flags(kSpec, "ps", "0"), {{"SLURM_PROCID", "3"}}), "/job:ps/task:0");
}

TEST(RankDerivation, AnExplicitTaskMustAgreeWithTheRank) {
  TaskConfigFlags f = Layout("ps:1,worker:3");
  f.job_name = "worker";
  f.task_index = "1";
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "2"}}), "/job:worker/task:1");
  EXPECT_EQ(ErrorOf(f, {{"SLURM_PROCID", "0"}}),
            "--job_name and --job_layout=ps:1,worker:3 with SLURM_PROCID=0 disagree on the job (worker vs ps); "
            "pass one of them");
  EXPECT_EQ(ErrorOf(f, {{"SLURM_PROCID", "3"}}),
            "--task_index and --job_layout=ps:1,worker:3 with SLURM_PROCID=3 disagree on the task index (1 vs 2); "
            "pass one of them");
  // DISTFLOW_CONFIG's task (worker 1) against the rank.
  EXPECT_THAT(ErrorOf(Layout("ps:1,worker:3", ""), {{"DISTFLOW_CONFIG", kConfigPs1}, {"SLURM_PROCID", "3"}}),
              HasSubstr("DISTFLOW_CONFIG and --job_layout=ps:1,worker:3 with SLURM_PROCID=3 disagree on the task "
                        "index (1 vs 2)"));
}

TEST(RankDerivation, ASparseJobIsPlacedInIndexOrder) {
  TaskConfigFlags f = Layout("worker:2", R"({"worker": {"0": "a:1", "3": "b:2"}})");
  EXPECT_EQ(TaskOf(f, {{"SLURM_PROCID", "1"}}), "/job:worker/task:3");
}

TEST(RankDerivation, TheRankWinsOverDefaults) {
  TaskConfigDefaults d;
  d.job = "worker";
  d.task_index = 0;
  absl::StatusOr<TaskConfig> t = ResolveTaskConfig(Layout("ps:1,worker:3"), FakeEnv({{"SLURM_PROCID", "0"}}), d);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->job, "ps");
  EXPECT_EQ(t->task_index, 0);
}

}  // namespace
}  // namespace distflow

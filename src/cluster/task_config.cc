#include "distflow/task_config.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/env.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"

namespace distflow {
namespace {

// What one configuration source says; unset parts are empty. Each part
// carries the name messages use for it ("--job_name", "DISTFLOW_CONFIG").
struct Source {
  std::optional<ClusterSpec> cluster;
  std::string cluster_from;
  std::string job;
  std::string job_from;
  std::optional<int> index;
  std::string index_from;
};

absl::StatusOr<int> ParseIndex(const std::string& what, double v) {
  if (v != std::floor(v)) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is not a whole number"));
  if (v < 0) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is negative; task indices start at 0"));
  if (v > 1e6) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is out of range"));
  return static_cast<int>(v);
}

// The TF_CONFIG-style document of source `name`.
absl::StatusOr<Source> ParseConfig(const std::string& name, const std::string& text) {
  google::protobuf::Struct doc;
  google::protobuf::util::JsonParseOptions opts;
  auto st = google::protobuf::util::JsonStringToMessage(text, &doc, opts);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(name, " is not valid JSON: ", st.ToString()));
  auto c = doc.fields().find("cluster");
  auto t = doc.fields().find("task");
  if (c == doc.fields().end() || t == doc.fields().end() || !c->second.has_struct_value() ||
      !t->second.has_struct_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " needs {\"cluster\": {...}, \"task\": {\"type\": ..., \"index\": ...}}"));
  }
  std::string cluster_json;
  (void)google::protobuf::util::MessageToJsonString(c->second.struct_value(), &cluster_json);
  absl::StatusOr<ClusterSpec> cluster = ClusterSpec::Parse(cluster_json);
  if (!cluster.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": bad cluster: ", cluster.status().message()));
  const auto& task = t->second.struct_value().fields();
  auto type = task.find("type");
  auto idx = task.find("index");
  if (type == task.end() || !type->second.has_string_value() || idx == task.end() || !idx->second.has_number_value()) {
    return absl::InvalidArgumentError(absl::StrCat(name, "'s task needs a string \"type\" and a number \"index\""));
  }
  ASSIGN_OR_RETURN(int index, ParseIndex(absl::StrCat(name, "'s task index"), idx->second.number_value()));
  return Source{*cluster, name, type->second.string_value(), name, index, name};
}

// The --task_index / --task_id flag value, if given.
absl::StatusOr<std::optional<int>> IndexFlag(const std::string& flag, const std::string& value) {
  if (value.empty()) return std::optional<int>();
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, " is not a whole number"));
  }
  ASSIGN_OR_RETURN(int index, ParseIndex(absl::StrCat("--", flag), static_cast<double>(v)));
  return std::optional<int>(index);
}

absl::StatusOr<Source> FlagSource(const TaskConfigFlags& flags) {
  Source s;
  if (!flags.cluster_spec.empty()) {
    absl::StatusOr<ClusterSpec> c = ClusterSpec::Parse(flags.cluster_spec);
    if (!c.ok())
      return absl::InvalidArgumentError(absl::StrCat("bad ", flags.cluster_spec_flag, ": ", c.status().message()));
    s.cluster = *c;
  }
  s.cluster_from = flags.cluster_spec_flag;
  s.job = flags.job_name;
  s.job_from = "--job_name";
  ASSIGN_OR_RETURN(std::optional<int> ti, IndexFlag("task_index", flags.task_index));
  ASSIGN_OR_RETURN(std::optional<int> tid, IndexFlag("task_id", flags.task_id));
  if (ti.has_value() && tid.has_value() && *ti != *tid) {
    return absl::InvalidArgumentError(absl::StrCat("--task_index=", *ti, " and --task_id=", *tid,
                                                   " disagree; --task_id is an alias, pass one of them"));
  }
  s.index = ti.has_value() ? ti : tid;
  s.index_from = "--task_index";
  return s;
}

// Every task needs its own fixed address that its peers can reach.
absl::Status CheckServable(const ClusterSpec& cluster) {
  std::map<std::string, std::string> seen;  // address -> task
  for (const auto& [job, tasks] : cluster.job_map()) {
    for (const auto& [index, address] : tasks) {
      const std::string task = TaskName(job, index);
      absl::StatusOr<std::pair<std::string, int>> hp = SplitHostPort(address);
      if (hp.ok() && hp->second == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            task, " has port 0 (", address, "): every task needs a fixed port that the other tasks can reach"));
      }
      auto [it, fresh] = seen.emplace(address, task);
      if (!fresh) {
        return absl::InvalidArgumentError(
            absl::StrCat(it->second, " and ", task, " have the same address ", address, ": give each task its own"));
      }
    }
  }
  return absl::OkStatus();
}

// One value from every source that sets it, and the name of the first such
// source; InvalidArgument naming two that disagree.
template <typename T>
struct Agreed {
  std::optional<T> value;
  std::string from;
};

template <typename T, typename Get, typename Show>
absl::StatusOr<Agreed<T>> Agree(const std::vector<Source>& sources, const char* what, Get get, Show show) {
  Agreed<T> out;
  for (const Source& s : sources) {
    auto [v, name] = get(s);
    if (!v.has_value()) continue;
    if (out.value.has_value() && !(*out.value == *v)) {
      return absl::InvalidArgumentError(absl::StrCat(out.from, " and ", name, " disagree on the ", what, " (",
                                                     show(*out.value), " vs ", show(*v), "); pass one of them"));
    }
    if (!out.value.has_value()) {
      out.value = v;
      out.from = name;
    }
  }
  return out;
}

// This process's rank from the first of kRankVariables that is set; every
// other one that is set must agree. nullopt if none is set.
absl::StatusOr<std::optional<std::pair<std::string, int>>> RankFromEnvironment(const EnvLookup& getenv) {
  std::optional<std::pair<std::string, int>> rank;
  for (const char* var : kRankVariables) {
    std::optional<std::string> value = getenv(var);
    if (!value.has_value() || value->empty()) continue;
    int64_t r = 0;
    if (!absl::SimpleAtoi(*value, &r) || r < 0 || r > 1000000) {
      return absl::InvalidArgumentError(
          absl::StrCat(var, "=", *value, " is not a rank (a whole number from 0); unset it or fix the launcher"));
    }
    if (rank.has_value() && rank->second != r) {
      return absl::InvalidArgumentError(absl::StrCat(rank->first, "=", rank->second, " and ", var, "=", r,
                                                     " disagree on this process's rank; unset one of them"));
    }
    if (!rank.has_value()) rank = std::make_pair(std::string(var), static_cast<int>(r));
  }
  return rank;
}

// The task `layout` gives the rank in `getenv`; the layout must match `cluster`
// (which came from `cluster_from`) job for job.
absl::StatusOr<Source> LayoutSource(const std::string& flag_text, const JobLayout& layout, const ClusterSpec& cluster,
                                    const std::string& cluster_from, const EnvLookup& getenv) {
  const std::string flag = absl::StrCat("--job_layout=", flag_text);
  std::set<std::string> in_layout;
  int ranks = 0;
  for (const auto& [job, count] : layout) {
    in_layout.insert(job);
    ranks += count;
    if (!cluster.HasJob(job)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " names job '", job, "', which ", cluster_from,
                       " does not have; its jobs are: ", absl::StrJoin(cluster.jobs(), ", ")));
    }
    if (cluster.num_tasks(job) != count) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " has ", count, " ", job, " tasks but ", cluster_from,
                                                     " has ", cluster.num_tasks(job), "; make them agree"));
    }
  }
  for (const std::string& job : cluster.jobs()) {
    if (in_layout.count(job) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " leaves out job '", job, "' (", cluster.num_tasks(job),
                                                     " tasks in ", cluster_from, "); add ", job, ":",
                                                     cluster.num_tasks(job)));
    }
  }
  ASSIGN_OR_RETURN(auto rank, RankFromEnvironment(getenv));
  if (!rank.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " places tasks by rank, but none of ", absl::StrJoin(kRankVariables, ", "),
                     " is set; start the program under srun or mpirun, or pass --job_name and --task_index instead"));
  }
  const auto& [var, r] = *rank;
  if (r >= ranks) {
    return absl::InvalidArgumentError(absl::StrCat(var, "=", r, " is beyond ", flag, ", which places ranks 0..",
                                                   ranks - 1, "; start ", ranks, " processes or extend the layout"));
  }
  int first = 0;
  for (const auto& [job, count] : layout) {
    if (r < first + count) {
      const std::string name = absl::StrCat(flag, " with ", var, "=", r);
      return Source{std::nullopt, "", job, name, cluster.task_indices(job)[r - first], name};
    }
    first += count;
  }
  return absl::InternalError("unreachable: rank inside the layout but in no job");
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<JobLayout> ParseJobLayout(absl::string_view text) {
  const std::string flag = absl::StrCat("--job_layout=", text);
  JobLayout layout;
  std::set<std::string> seen;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(entry, ':');
    int count = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &count) || count < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": entry '", entry,
                                                     "' is not JOB:COUNT with COUNT a whole number from 1; "
                                                     "write e.g. --job_layout=ps:1,worker:3"));
    }
    if (!IsValidJobName(parts[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": bad job name '", parts[0], "' (must match [A-Za-z][A-Za-z0-9_]*)"));
    }
    if (!seen.insert(std::string(parts[0])).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": job '", parts[0], "' appears twice; give each job once with its task count"));
    }
    layout.emplace_back(std::string(parts[0]), count);
  }
  return layout;
}

absl::StatusOr<TaskConfig> ResolveTaskConfig(const TaskConfigFlags& flags, const EnvLookup& getenv,
                                             const TaskConfigDefaults& defaults, Env* env) {
  if (env == nullptr) env = Env::Default();
  std::optional<JobLayout> layout;
  if (!flags.job_layout.empty()) {
    ASSIGN_OR_RETURN(layout, ParseJobLayout(flags.job_layout));
  }
  // Every source of configuration; those that say the same thing must agree.
  std::vector<Source> sources;
  ASSIGN_OR_RETURN(Source from_flags, FlagSource(flags));
  sources.push_back(std::move(from_flags));
  if (!flags.cluster_config.empty()) {
    absl::StatusOr<std::string> f = env->ReadFile(flags.cluster_config);
    if (!f.ok()) return absl::Status(f.status().code(), absl::StrCat("--cluster_config: ", f.status().message()));
    ASSIGN_OR_RETURN(Source s, ParseConfig("--cluster_config", *f));
    sources.push_back(std::move(s));
  }
  if (std::optional<std::string> text = getenv("DISTFLOW_CONFIG"); text.has_value() && !text->empty()) {
    ASSIGN_OR_RETURN(Source s, ParseConfig("DISTFLOW_CONFIG", *text));
    sources.push_back(std::move(s));
  }
  ASSIGN_OR_RETURN(Agreed<ClusterSpec> cluster,
                   Agree<ClusterSpec>(
                       sources, "cluster", [](const Source& s) { return std::make_pair(s.cluster, s.cluster_from); },
                       [](const ClusterSpec& c) { return c.ToFlagString().value_or(c.ToJson()); }));
  if (!cluster.value.has_value() && defaults.cluster.has_value()) {
    cluster.value = defaults.cluster;
    cluster.from = "the default cluster";
  }
  if (!cluster.value.has_value()) {
    return absl::InvalidArgumentError("no cluster: pass --cluster_spec, --cluster_config or DISTFLOW_CONFIG");
  }
  if (layout.has_value()) {
    ASSIGN_OR_RETURN(Source s, LayoutSource(flags.job_layout, *layout, *cluster.value, cluster.from, getenv));
    sources.push_back(std::move(s));
  }
  ASSIGN_OR_RETURN(Agreed<std::string> job, Agree<std::string>(
                                                sources, "job",
                                                [](const Source& s) {
                                                  return std::make_pair(
                                                      s.job.empty() ? std::optional<std::string>() : s.job, s.job_from);
                                                },
                                                [](const std::string& j) { return j; }));
  ASSIGN_OR_RETURN(Agreed<int> index,
                   Agree<int>(
                       sources, "task index", [](const Source& s) { return std::make_pair(s.index, s.index_from); },
                       [](int i) { return absl::StrCat(i); }));
  if (!job.value.has_value() && !defaults.job.empty()) job = {defaults.job, "--job_name (default)"};
  if (!index.value.has_value() && defaults.task_index.has_value())
    index = {defaults.task_index, "--task_index (default)"};
  const char* const kHow = "; or set DISTFLOW_CONFIG, or pass --job_layout under srun or mpirun";
  if (!job.value.has_value()) return absl::InvalidArgumentError(absl::StrCat("missing --job_name", kHow));
  if (!index.value.has_value()) return absl::InvalidArgumentError(absl::StrCat("missing --task_index", kHow));

  RETURN_IF_ERROR(CheckServable(*cluster.value));
  if (absl::Status st = cluster.value->ValidateTask(*job.value, *index.value); !st.ok()) {
    const std::string& culprit = cluster.value->HasJob(*job.value) ? index.from : job.from;
    return absl::InvalidArgumentError(absl::StrCat("bad ", culprit, ": ", st.message()));
  }
  TaskConfig out;
  out.cluster = *cluster.value;
  out.job = *job.value;
  out.task_index = *index.value;
  if (layout.has_value()) out.placed_by = sources.back().job_from;
  return out;
}

}  // namespace distflow

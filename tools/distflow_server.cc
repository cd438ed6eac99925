// distflow-server: one task of a cluster.
//
//   distflow-server --cluster_spec='ps|localhost:2222,worker|localhost:2223' --job_name=ps --task_index=0
//   DISTFLOW_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 1}}' distflow-server
//
// Exits 0 on SIGTERM/SIGINT or when the chief asks the cluster to shut down,
// 2 on a bad command line or cluster spec, 1 if the server cannot start.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "distributed/server.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, cluster_spec, "", "cluster as 'job|host:port;host:port,job|...' or JSON");
ABSL_FLAG(std::string, job_name, "", "this task's job");
// Strings, so that a value that is not a number is our clear error (exit 2).
ABSL_FLAG(std::string, task_index, "", "this task's index in its job");
ABSL_FLAG(std::string, task_id, "", "alias of --task_index");
ABSL_FLAG(int, bulk_port, 0,
          "port for bulk tensor transfer on this task's host: 0 = any free one, -1 = off "
          "(large tensors then travel inside gRPC messages)");
ABSL_FLAG(std::string, cluster_config, "", "file holding {\"cluster\": {...}, \"task\": {\"type\": J, \"index\": I}}");

namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "distflow-server: %s\n", msg.c_str());
  return code;
}

constexpr char kFlags[] = "the flags";

// What one configuration source says; unset parts are empty.
struct Source {
  std::string name;  // "--cluster_spec", "DISTFLOW_CONFIG", ...
  std::optional<distflow::ClusterSpec> cluster;
  std::string job;
  std::optional<int> index;
};

absl::StatusOr<int> ParseIndex(const std::string& what, double v) {
  if (v != std::floor(v)) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is not a whole number"));
  if (v < 0) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is negative; task indices start at 0"));
  if (v > 1e6) return absl::InvalidArgumentError(absl::StrCat(what, " ", v, " is out of range"));
  return static_cast<int>(v);
}

// Parses the TF_CONFIG-style document of source `name`.
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
  Source src;
  src.name = name;
  std::string cluster_json;
  (void)google::protobuf::util::MessageToJsonString(c->second.struct_value(), &cluster_json);
  absl::StatusOr<distflow::ClusterSpec> cluster = distflow::ClusterSpec::Parse(cluster_json);
  if (!cluster.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ": bad cluster: ", cluster.status().message()));
  src.cluster = *cluster;
  const auto& task = t->second.struct_value().fields();
  auto type = task.find("type");
  auto idx = task.find("index");
  if (type == task.end() || !type->second.has_string_value() || idx == task.end() || !idx->second.has_number_value()) {
    return absl::InvalidArgumentError(absl::StrCat(name, "'s task needs a string \"type\" and a number \"index\""));
  }
  src.job = type->second.string_value();
  absl::StatusOr<int> index = ParseIndex(absl::StrCat(name, "'s task index"), idx->second.number_value());
  if (!index.ok()) return index.status();
  src.index = *index;
  return src;
}

// The --task_index / --task_id flag value, if given.
absl::StatusOr<std::optional<int>> IndexFlag(const std::string& flag, const std::string& value) {
  if (value.empty()) return std::optional<int>();
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, " is not a whole number"));
  }
  absl::StatusOr<int> index = ParseIndex(absl::StrCat("--", flag), static_cast<double>(v));
  if (!index.ok()) return index.status();
  return std::optional<int>(*index);
}

// Every task needs its own fixed address that its peers can reach.
absl::Status CheckServable(const distflow::ClusterSpec& cluster) {
  std::map<std::string, std::string> seen;  // address -> task
  for (const auto& [job, tasks] : cluster.job_map()) {
    for (const auto& [index, address] : tasks) {
      const std::string task = absl::StrCat("/job:", job, "/task:", index);
      absl::StatusOr<std::pair<std::string, int>> hp = distflow::SplitHostPort(address);
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

// One value from every source that sets it: InvalidArgument naming two that disagree.
// `flag` names the command-line source of this value.
template <typename T, typename Get, typename Show>
absl::StatusOr<std::optional<T>> Agree(const std::vector<Source>& sources, const char* what, const char* flag,
                                       Get get, Show show) {
  std::optional<T> value;
  std::string from;
  for (const Source& s : sources) {
    std::optional<T> v = get(s);
    if (!v.has_value()) continue;
    const std::string name = s.name == kFlags ? flag : s.name;
    if (value.has_value() && !(*value == *v)) {
      return absl::InvalidArgumentError(absl::StrCat(from, " and ", name, " disagree on the ", what, " (",
                                                     show(*value), " vs ", show(*v), "); pass one of them"));
    }
    if (!value.has_value()) {
      value = v;
      from = name;
    }
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs one task of a distflow cluster");
  absl::ParseCommandLine(argc, argv);

  // Every source of configuration; those that say the same thing agree.
  std::vector<Source> sources;
  {
    Source flags;
    flags.name = kFlags;
    if (!absl::GetFlag(FLAGS_cluster_spec).empty()) {
      absl::StatusOr<distflow::ClusterSpec> c = distflow::ClusterSpec::Parse(absl::GetFlag(FLAGS_cluster_spec));
      if (!c.ok()) return Fail(2, absl::StrCat("bad --cluster_spec: ", c.status().message()));
      flags.cluster = *c;
    }
    flags.job = absl::GetFlag(FLAGS_job_name);
    absl::StatusOr<std::optional<int>> ti = IndexFlag("task_index", absl::GetFlag(FLAGS_task_index));
    absl::StatusOr<std::optional<int>> tid = IndexFlag("task_id", absl::GetFlag(FLAGS_task_id));
    if (!ti.ok()) return Fail(2, std::string(ti.status().message()));
    if (!tid.ok()) return Fail(2, std::string(tid.status().message()));
    if (ti->has_value() && tid->has_value() && **ti != **tid) {
      return Fail(2, absl::StrCat("--task_index=", **ti, " and --task_id=", **tid,
                                  " disagree; --task_id is an alias, pass one of them"));
    }
    flags.index = ti->has_value() ? *ti : *tid;
    sources.push_back(std::move(flags));
  }
  if (!absl::GetFlag(FLAGS_cluster_config).empty()) {
    absl::StatusOr<std::string> f = distflow::Env::Default()->ReadFile(absl::GetFlag(FLAGS_cluster_config));
    if (!f.ok()) return Fail(2, absl::StrCat("--cluster_config: ", f.status().message()));
    absl::StatusOr<Source> s = ParseConfig("--cluster_config", *f);
    if (!s.ok()) return Fail(2, std::string(s.status().message()));
    sources.push_back(std::move(*s));
  }
  if (const char* env = std::getenv("DISTFLOW_CONFIG"); env != nullptr && *env != '\0') {
    absl::StatusOr<Source> s = ParseConfig("DISTFLOW_CONFIG", env);
    if (!s.ok()) return Fail(2, std::string(s.status().message()));
    sources.push_back(std::move(*s));
  }
  auto cluster = Agree<distflow::ClusterSpec>(
      sources, "cluster", "--cluster_spec", [](const Source& s) { return s.cluster; },
      [](const distflow::ClusterSpec& c) { return c.ToFlagString().value_or(c.ToJson()); });
  auto job_or = Agree<std::string>(
      sources, "job", "--job_name", [](const Source& s) { return s.job.empty() ? std::optional<std::string>() : s.job; },
      [](const std::string& j) { return j; });
  auto index_or = Agree<int>(
      sources, "task index", "--task_index", [](const Source& s) { return s.index; }, [](int i) { return absl::StrCat(i); });
  for (const absl::Status& st : {cluster.status(), job_or.status(), index_or.status()}) {
    if (!st.ok()) return Fail(2, std::string(st.message()));
  }
  if (!cluster->has_value()) return Fail(2, "no cluster: pass --cluster_spec, --cluster_config or DISTFLOW_CONFIG");
  if (!job_or->has_value()) return Fail(2, "missing --job_name");
  if (!index_or->has_value()) return Fail(2, "missing --task_index");
  const std::string job = **job_or;
  const int index = **index_or;
  if (absl::Status st = CheckServable(**cluster); !st.ok()) return Fail(2, std::string(st.message()));
  absl::Status valid = (*cluster)->ValidateTask(job, index);
  if (!valid.ok()) return Fail(2, std::string(valid.message()));

  distflow::SetLogPrefix(absl::StrCat("/job:", job, "/task:", index));
  // Block the signals in every thread; one thread waits for them.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  distflow::ServerOptions options;
  options.bulk_port = absl::GetFlag(FLAGS_bulk_port);
  if (options.bulk_port < -1 || options.bulk_port > 65535) {
    return Fail(2, absl::StrCat("bad --bulk_port=", options.bulk_port, ": use a port, 0 for any, or -1 for none"));
  }
  absl::StatusOr<std::unique_ptr<distflow::Server>> server = distflow::Server::Create(**cluster, job, index, options);
  if (!server.ok()) return Fail(2, std::string(server.status().message()));
  absl::Status started = (*server)->Start();
  if (!started.ok()) return Fail(1, std::string(started.message()));

  distflow::Server* raw = server->get();
  std::thread([raw, sigs] {
    int sig = 0;
    sigwait(&sigs, &sig);
    LOG(INFO) << "Received signal " << sig << "; shutting down";
    raw->Stop();
  }).detach();
  raw->Join();
  LOG(INFO) << "Server stopped";
  std::fflush(stdout);
  std::_Exit(0);  // the signal thread may still be blocked in sigwait
}

// distflow-server: one task of a cluster.
//
//   distflow-server --cluster_spec='ps|localhost:2222,worker|localhost:2223' --job_name=ps --task_index=0
//   DISTFLOW_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 1}}' distflow-server
//
// Exits 0 on SIGTERM/SIGINT or when the chief asks the cluster to shut down,
// 2 on a bad command line or cluster spec, 1 if the server cannot start.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "base/env.h"
#include "base/logging.h"
#include "distributed/server.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(std::string, cluster_spec, "", "cluster as 'job|host:port;host:port,job|...' or JSON");
ABSL_FLAG(std::string, job_name, "", "this task's job");
ABSL_FLAG(int, task_index, -1, "this task's index in its job");
ABSL_FLAG(int, task_id, -1, "alias of --task_index");
ABSL_FLAG(int, bulk_port, 0,
          "port for bulk tensor transfer on this task's host: 0 = any free one, -1 = off "
          "(large tensors then travel inside gRPC messages)");
ABSL_FLAG(std::string, cluster_config, "", "file holding {\"cluster\": {...}, \"task\": {\"type\": J, \"index\": I}}");

namespace {

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "distflow-server: %s\n", msg.c_str());
  return code;
}

// Parses the TF_CONFIG-style document.
absl::Status ParseConfig(const std::string& text, std::string* cluster_json, std::string* job, int* index) {
  google::protobuf::Struct doc;
  google::protobuf::util::JsonParseOptions opts;
  auto st = google::protobuf::util::JsonStringToMessage(text, &doc, opts);
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("config is not valid JSON: ", st.ToString()));
  auto c = doc.fields().find("cluster");
  auto t = doc.fields().find("task");
  if (c == doc.fields().end() || t == doc.fields().end() || !c->second.has_struct_value() ||
      !t->second.has_struct_value()) {
    return absl::InvalidArgumentError("config needs {\"cluster\": {...}, \"task\": {\"type\": ..., \"index\": ...}}");
  }
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(c->second.struct_value(), &out);
  *cluster_json = out;
  const auto& task = t->second.struct_value().fields();
  auto type = task.find("type");
  auto idx = task.find("index");
  if (type == task.end() || !type->second.has_string_value() || idx == task.end() || !idx->second.has_number_value()) {
    return absl::InvalidArgumentError("config's task needs a string \"type\" and a number \"index\"");
  }
  *job = type->second.string_value();
  *index = static_cast<int>(idx->second.number_value());
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs one task of a distflow cluster");
  absl::ParseCommandLine(argc, argv);
  std::string spec = absl::GetFlag(FLAGS_cluster_spec);
  std::string job = absl::GetFlag(FLAGS_job_name);
  int index = absl::GetFlag(FLAGS_task_index);
  if (index < 0) index = absl::GetFlag(FLAGS_task_id);

  std::string config_text;
  if (!absl::GetFlag(FLAGS_cluster_config).empty()) {
    absl::StatusOr<std::string> f = distflow::Env::Default()->ReadFile(absl::GetFlag(FLAGS_cluster_config));
    if (!f.ok()) return Fail(2, std::string(f.status().message()));
    config_text = *f;
  } else if (spec.empty() && std::getenv("DISTFLOW_CONFIG") != nullptr) {
    config_text = std::getenv("DISTFLOW_CONFIG");
  }
  if (!config_text.empty()) {
    absl::Status s = ParseConfig(config_text, &spec, &job, &index);
    if (!s.ok()) return Fail(2, std::string(s.message()));
  }
  if (spec.empty()) return Fail(2, "no cluster: pass --cluster_spec, --cluster_config or DISTFLOW_CONFIG");
  absl::StatusOr<distflow::ClusterSpec> cluster = distflow::ClusterSpec::Parse(spec);
  if (!cluster.ok()) return Fail(2, absl::StrCat("bad --cluster_spec: ", cluster.status().message()));
  if (job.empty()) return Fail(2, "missing --job_name");
  if (index < 0) return Fail(2, "missing --task_index");
  absl::Status valid = cluster->ValidateTask(job, index);
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
  absl::StatusOr<std::unique_ptr<distflow::Server>> server = distflow::Server::Create(*cluster, job, index, options);
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

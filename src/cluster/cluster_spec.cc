#include "distflow/cluster_spec.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "cluster/device_name.h"

namespace distflow {
namespace {

// Error-message form of user input: quoted, shortened if huge.
std::string Quote(absl::string_view s) {
  constexpr size_t kMax = 80;
  if (s.size() <= kMax) return absl::StrCat("'", s, "'");
  return absl::StrCat("'", s.substr(0, kMax), "...' (", s.size(), " chars)");
}

bool AllOf(absl::string_view s, bool (*pred)(char)) { return std::all_of(s.begin(), s.end(), pred); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHostChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}
bool IsV6Char(char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; }

// Parses a non-negative decimal int (digits only, no sign).
bool ParseIndex(absl::string_view s, int* out) {
  return !s.empty() && s.size() <= 10 && AllOf(s, IsDigit) && absl::SimpleAtoi(s, out) && *out >= 0;
}

// "0..3" for a dense job, else "0, 5, 9" (shortened if long).
std::string FormatIndices(const std::map<int, std::string>& tasks) {
  if (tasks.empty()) return "none (the job has no tasks)";
  if (tasks.rbegin()->first == static_cast<int>(tasks.size()) - 1) {
    return tasks.size() == 1 ? "0" : absl::StrCat("0..", tasks.size() - 1);
  }
  std::vector<int> shown;
  for (const auto& [index, address] : tasks) {
    if (shown.size() == 20) break;
    shown.push_back(index);
  }
  std::string out = absl::StrJoin(shown, ", ");
  if (tasks.size() > shown.size()) absl::StrAppend(&out, ", ...");
  return out;
}

bool IsDense(const std::map<int, std::string>& tasks) {
  return tasks.empty() || tasks.rbegin()->first == static_cast<int>(tasks.size()) - 1;
}

absl::Status TaskError(absl::string_view job, int index, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("cluster spec: job '", job, "' task ", index, ": ", status.message()));
}

absl::Status CheckJobName(absl::string_view name) {
  if (IsValidJobName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("cluster spec: bad job name ", Quote(name), " (must match [A-Za-z][A-Za-z0-9_]*)"));
}

}  // namespace

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(absl::string_view address) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("invalid address ", Quote(address), ": ", why));
  };
  if (address.empty()) return bad("empty address (expected HOST:PORT)");
  for (char c : address) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return bad("contains whitespace");
    }
  }
  absl::string_view host, port;
  if (address[0] == '[') {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos) return bad("unbalanced '['");
    host = address.substr(1, close - 1);
    absl::string_view rest = address.substr(close + 1);
    if (host.empty()) return bad("empty host");
    if (!AllOf(host, IsV6Char)) return bad("malformed IPv6 literal");
    if (rest.empty()) return bad("missing port (expected [HOST]:PORT)");
    if (rest[0] != ':') return bad("expected ':' after ']'");
    port = rest.substr(1);
  } else {
    if (address.find_first_of("[]") != absl::string_view::npos) {
      return bad("unbalanced brackets");
    }
    const size_t colon = address.find(':');
    if (colon == absl::string_view::npos) {
      return bad("missing port (expected HOST:PORT)");
    }
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (port.find(':') != absl::string_view::npos) {
      return bad("too many ':' (write IPv6 hosts as [addr]:port)");
    }
    if (host.empty()) return bad("empty host");
    if (!AllOf(host, IsHostChar)) return bad("invalid character in host");
  }
  if (port.empty()) return bad("missing port");
  if (port.find('/') != absl::string_view::npos) {
    return bad("unexpected path after the port");
  }
  int port_number = 0;
  if (port.size() > 5 || !AllOf(port, IsDigit) || !absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return bad(absl::StrCat("port ", Quote(port), " is not a number in [0, 65535]"));
  }
  return std::make_pair(std::string(host), port_number);
}

absl::StatusOr<ClusterSpec> ClusterSpec::FromJobs(JobMap jobs) {
  if (jobs.empty()) {
    return absl::InvalidArgumentError("cluster spec: empty spec (no jobs)");
  }
  for (const auto& [name, tasks] : jobs) {
    RETURN_IF_ERROR(CheckJobName(name));
    for (const auto& [index, address] : tasks) {
      if (index < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("cluster spec: job '", name, "' has negative task index ", index));
      }
      absl::Status s = SplitHostPort(address).status();
      if (!s.ok()) return TaskError(name, index, s);
    }
  }
  return ClusterSpec(std::move(jobs));
}

absl::StatusOr<ClusterSpec> ClusterSpec::Parse(absl::string_view text) {
  const absl::string_view t = absl::StripLeadingAsciiWhitespace(text);
  if (!t.empty() && t[0] == '{') return ParseJson(text);
  return ParseFlagForm(text);
}

absl::StatusOr<ClusterSpec> ClusterSpec::ParseFlagForm(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) {
    return absl::InvalidArgumentError("cluster spec: empty spec (no jobs)");
  }
  JobMap jobs;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.size() >= 2 && (entry[0] == '\'' || entry[0] == '"') && entry.back() == entry[0]) {
      entry = entry.substr(1, entry.size() - 2);
    }
    if (entry.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec ", Quote(text), ": empty job entry (stray ',')"));
    }
    const size_t bar = entry.find('|');
    if (bar == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("cluster spec: job entry ", Quote(entry), " has no '|' (expected NAME|HOST:PORT;HOST:PORT...)"));
    }
    const absl::string_view name = entry.substr(0, bar);
    RETURN_IF_ERROR(CheckJobName(name));
    auto [it, inserted] = jobs.try_emplace(std::string(name));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec: duplicate job '", name, "'"));
    }
    const absl::string_view tasks = entry.substr(bar + 1);
    if (tasks.empty()) continue;  // "ps|": a job with no tasks
    int index = 0;
    for (absl::string_view address : absl::StrSplit(tasks, ';')) {
      absl::Status s = SplitHostPort(address).status();
      if (!s.ok()) return TaskError(name, index, s);
      it->second.emplace(index++, std::string(address));
    }
  }
  return ClusterSpec(std::move(jobs));
}

absl::StatusOr<ClusterSpec> ClusterSpec::ParseJson(absl::string_view text) {
  google::protobuf::Value root;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(google::protobuf::StringPiece(text.data(), text.size()), &root);
  if (!parsed.ok()) {
    const auto raw = parsed.message();
    std::string message(raw.data(), std::min<size_t>(raw.size(), 300));
    const bool duplicate = absl::StrContains(message, "Repeated map key");
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec: invalid JSON", duplicate ? " (duplicate job or task)" : "", ": ", message));
  }
  if (root.kind_case() != google::protobuf::Value::kStructValue) {
    return absl::InvalidArgumentError("cluster spec: JSON must be an object mapping job names to tasks");
  }
  const auto& fields = root.struct_value().fields();
  if (fields.empty()) {
    return absl::InvalidArgumentError("cluster spec: empty spec (no jobs)");
  }
  // Sort names so that errors are deterministic.
  std::vector<std::string> names;
  for (const auto& field : fields) names.push_back(field.first);
  std::sort(names.begin(), names.end());
  JobMap jobs;
  for (const std::string& name : names) {
    RETURN_IF_ERROR(CheckJobName(name));
    const google::protobuf::Value& job = fields.at(name);
    std::map<int, std::string>& tasks = jobs[name];
    auto bad_job = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec: job '", name, "': ", why));
    };
    if (job.kind_case() == google::protobuf::Value::kListValue) {
      const auto& values = job.list_value().values();
      for (int i = 0; i < values.size(); ++i) {
        if (values[i].kind_case() != google::protobuf::Value::kStringValue) {
          return bad_job(absl::StrCat("task ", i, " is not a string address"));
        }
        tasks.emplace(i, values[i].string_value());
      }
    } else if (job.kind_case() == google::protobuf::Value::kStructValue) {
      for (const auto& [key, value] : job.struct_value().fields()) {
        int index = 0;
        if (!ParseIndex(key, &index)) {
          return bad_job(absl::StrCat("task key ", Quote(key), " is not a non-negative integer"));
        }
        if (value.kind_case() != google::protobuf::Value::kStringValue) {
          return bad_job(absl::StrCat("task ", Quote(key), " is not a string address"));
        }
        if (!tasks.emplace(index, value.string_value()).second) {
          return bad_job(absl::StrCat("two addresses for task ", index, " ('", tasks[index], "' and '",
                                      value.string_value(), "')"));
        }
      }
    } else {
      return bad_job(
          "must be a list of addresses or an object mapping "
          "task indices to addresses");
    }
  }
  return FromJobs(std::move(jobs));
}

absl::StatusOr<std::string> ClusterSpec::ToFlagString() const {
  std::vector<std::string> entries;
  for (const auto& [name, tasks] : jobs_) {
    if (!IsDense(tasks)) {
      return absl::InvalidArgumentError(absl::StrCat("cluster spec: job '", name, "' is sparse (tasks ",
                                                     FormatIndices(tasks),
                                                     ") and cannot be written in flag form; "
                                                     "use ToJson()"));
    }
    std::vector<absl::string_view> addresses;
    for (const auto& [index, address] : tasks) addresses.push_back(address);
    entries.push_back(absl::StrCat(name, "|", absl::StrJoin(addresses, ";")));
  }
  return absl::StrJoin(entries, ",");
}

// Names and addresses are validated (no quotes, backslashes or control
// characters), so no JSON escaping is needed.
std::string ClusterSpec::ToJson() const {
  std::vector<std::string> entries;
  for (const auto& [name, tasks] : jobs_) {
    std::vector<std::string> items;
    const bool dense = IsDense(tasks);
    for (const auto& [index, address] : tasks) {
      items.push_back(dense ? absl::StrCat("\"", address, "\"") : absl::StrCat("\"", index, "\":\"", address, "\""));
    }
    entries.push_back(absl::StrCat("\"", name, "\":", dense ? "[" : "{", absl::StrJoin(items, ","), dense ? "]" : "}"));
  }
  return absl::StrCat("{", absl::StrJoin(entries, ","), "}");
}

std::vector<std::string> ClusterSpec::jobs() const {
  std::vector<std::string> names;
  for (const auto& job : jobs_) names.push_back(job.first);
  return names;
}

bool ClusterSpec::HasJob(absl::string_view job) const { return jobs_.find(std::string(job)) != jobs_.end(); }

int ClusterSpec::num_tasks(absl::string_view job) const {
  auto it = jobs_.find(std::string(job));
  return it == jobs_.end() ? 0 : static_cast<int>(it->second.size());
}

std::vector<int> ClusterSpec::task_indices(absl::string_view job) const {
  std::vector<int> indices;
  auto it = jobs_.find(std::string(job));
  if (it == jobs_.end()) return indices;
  for (const auto& task : it->second) indices.push_back(task.first);
  return indices;
}

absl::StatusOr<std::string> ClusterSpec::task_address(absl::string_view job, int task_index) const {
  RETURN_IF_ERROR(ValidateTask(job, task_index));
  return jobs_.find(std::string(job))->second.at(task_index);
}

bool ClusterSpec::HasTask(absl::string_view job, int task_index) const {
  auto it = jobs_.find(std::string(job));
  return it != jobs_.end() && it->second.count(task_index) > 0;
}

std::string TaskName(absl::string_view job, int task_index) {
  return absl::StrCat("/job:", job, "/replica:0/task:", task_index);
}

std::vector<std::string> ClusterSpec::AllTaskNames() const {
  std::vector<std::string> names;
  for (const auto& [name, tasks] : jobs_) {
    for (const auto& task : tasks) {
      names.push_back(TaskName(name, task.first));
    }
  }
  return names;
}

absl::Status ClusterSpec::ValidateTask(absl::string_view job_name, int task_index) const {
  auto it = jobs_.find(std::string(job_name));
  if (it == jobs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("job_name ", Quote(job_name), " is not in the cluster; jobs are: ",
                                                   jobs_.empty() ? "none" : absl::StrJoin(jobs(), ", ")));
  }
  if (it->second.count(task_index) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("task_index ", task_index, " is not a task of job '", job_name,
                                                   "'; valid indices: ", FormatIndices(it->second)));
  }
  return absl::OkStatus();
}

}  // namespace distflow

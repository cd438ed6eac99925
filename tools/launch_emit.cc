#include "launch_emit.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "distflow/cluster_spec.h"

namespace distflow {
namespace {

// The jobs of the cluster in rank order, skipping empty ones.
std::vector<std::pair<std::string, int>> Jobs(const EmitOptions& o) {
  std::vector<std::pair<std::string, int>> jobs;
  if (o.ps > 0) jobs.emplace_back("ps", o.ps);
  jobs.emplace_back("worker", o.workers);
  return jobs;
}

std::string Layout(const EmitOptions& o) {
  return absl::StrJoin(Jobs(o), ",", [](std::string* out, const std::pair<std::string, int>& j) {
    absl::StrAppend(out, j.first, ":", j.second);
  });
}

// One shell word: bare if it has nothing the shell would interpret.
std::string ShellWord(absl::string_view s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && (absl::ascii_isalnum(c) || absl::string_view("_-./:=,@%+").find(c) != absl::string_view::npos);
  if (plain) return std::string(s);
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::string ShellJoin(const std::vector<std::string>& words) {
  return absl::StrJoin(words, " ", [](std::string* out, const std::string& w) { out->append(ShellWord(w)); });
}

// A YAML double-quoted scalar.
std::string YamlQuote(absl::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// `text` as the value of a YAML key or list item at `indent` spaces: a
// literal block (readable scripts) when it can be one exactly, else quoted.
std::string YamlText(absl::string_view text, int indent) {
  bool block = !text.empty() && text.back() == '\n' && text.front() != ' ' && text.front() != '\n';
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    block = block && (c >= 0x20 || c == '\n') && c != 0x7f;
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text.substr(0, text.size() - 1), '\n');
  for (absl::string_view line : lines) {
    // A line of only spaces, or one ending in spaces, would not survive a reader's eye or an editor.
    block = block && (line.empty() || line.back() != ' ');
  }
  if (!block) return YamlQuote(text);
  std::string out = "|\n";
  const std::string pad(static_cast<size_t>(indent), ' ');
  for (absl::string_view line : lines) absl::StrAppend(&out, line.empty() ? "" : pad, line, "\n");
  out.pop_back();
  return out;
}

std::string Service(const EmitOptions& o, const std::string& job) {
  const std::string name = absl::StrCat(o.name, "-", job);
  const std::string labels =
      absl::StrCat("    app.kubernetes.io/name: \"distflow\"\n", "    app.kubernetes.io/instance: ", YamlQuote(o.name),
                   "\n", "    app.kubernetes.io/component: ", YamlQuote(job), "\n");
  return absl::StrCat("apiVersion: v1\n", "kind: Service\n", "metadata:\n", "  name: ", YamlQuote(name), "\n",
                      "  labels:\n", labels, "spec:\n", "  # Headless: a DNS name per pod (", name, "-0.", name,
                      "), published before the pod is ready so\n",
                      "  # that tasks starting together can find each other.\n", "  clusterIP: \"None\"\n",
                      "  publishNotReadyAddresses: true\n", "  selector:\n", labels, "  ports:\n",
                      "  - name: \"grpc\"\n", "    port: ", o.port, "\n", "    targetPort: ", o.port, "\n");
}

// The container's /bin/sh -c script: the task index is the pod's ordinal.
// No "$(" anywhere: Kubernetes would try to expand it as $(VAR).
std::string PodScript(const EmitOptions& o, const std::string& job, const ClusterSpec& cluster) {
  const std::string service = absl::StrCat(o.name, "-", job);
  std::vector<std::string> argv = job == "ps" ? std::vector<std::string>{o.ps_program} : o.program;
  return absl::StrCat(
      "set -e\n", "# The pod's ordinal (", service, "-2 -> 2) is the task index.\n", "i=\"${HOSTNAME##*-}\"\n",
      "case \"$i\" in ''|*[!0-9]*)\n", "  echo \"distflow: HOSTNAME=$HOSTNAME does not end in a pod ordinal (", service,
      "-N)\" >&2\n", "  exit 2;;\n", "esac\n",
      "# The server listens on its own DNS name: wait up to 2 minutes for it to resolve.\n", "n=0\n",
      "while command -v getent >/dev/null 2>&1 && ! getent hosts \"", service, "-$i.", service,
      "\" >/dev/null 2>&1 && [ \"$n\" -lt 120 ]; do\n", "  n=`expr \"$n\" + 1`\n", "  sleep 1\n", "done\n",
      "export DISTFLOW_CONFIG=",
      ShellWord(absl::StrCat("{\"cluster\": ", cluster.ToJson(), ", \"task\": {\"type\": \"", job, "\", \"index\": ")),
      "\"$i\"'}}'\n", "exec ", ShellJoin(argv), " --job_name=", job,
      " --task_index=\"$i\" --cluster_spec=", ShellWord(cluster.ToFlagString().value_or("")), "\n");
}

std::string StatefulSet(const EmitOptions& o, const std::string& job, int replicas, const ClusterSpec& cluster) {
  const std::string name = absl::StrCat(o.name, "-", job);
  auto labels = [&](int indent) {
    const std::string pad(static_cast<size_t>(indent), ' ');
    return absl::StrCat(pad, "app.kubernetes.io/name: \"distflow\"\n", pad,
                        "app.kubernetes.io/instance: ", YamlQuote(o.name), "\n", pad,
                        "app.kubernetes.io/component: ", YamlQuote(job), "\n");
  };
  const std::string probe_port = absl::StrCat("          grpc:\n", "            port: ", o.port, "\n");
  return absl::StrCat(
      "apiVersion: apps/v1\n", "kind: StatefulSet\n", "metadata:\n", "  name: ", YamlQuote(name), "\n", "  labels:\n",
      labels(4), "spec:\n", "  serviceName: ", YamlQuote(name), "\n", "  replicas: ", replicas, "\n",
      "  # Every task at once: the workers wait for the ps tasks themselves.\n",
      "  podManagementPolicy: \"Parallel\"\n", "  selector:\n", "    matchLabels:\n", labels(6), "  template:\n",
      "    metadata:\n", "      labels:\n", labels(8), "    spec:\n", "      containers:\n",
      "      - name: ", YamlQuote(job), "\n", "        image: ", YamlQuote(o.image), "\n", "        command:\n",
      "        - \"/bin/sh\"\n", "        - \"-c\"\n", "        - ", YamlText(PodScript(o, job, cluster), 10), "\n",
      "        ports:\n", "        - name: \"grpc\"\n", "          containerPort: ", o.port, "\n",
      "        # The task's gRPC server answers grpc.health.v1 once it serves.\n", "        readinessProbe:\n",
      probe_port, "          periodSeconds: 5\n", "        livenessProbe:\n", probe_port,
      "          initialDelaySeconds: 60\n", "          periodSeconds: 10\n", "          failureThreshold: 6\n");
}

}  // namespace

absl::Status CheckEmitOptions(const EmitOptions& o) {
  if (o.ps < 0 || o.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ps=", o.ps, " --workers=", o.workers, ": need ps >= 0 and workers >= 1"));
  }
  if (o.ps + o.workers > 10000) {
    return absl::InvalidArgumentError(absl::StrCat("--ps=", o.ps, " --workers=", o.workers, ": at most 10000 tasks"));
  }
  if (o.port < 1 || o.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--base_port=", o.port, " is not a port (1..65535)"));
  }
  if (o.program.empty()) return absl::InvalidArgumentError("no program: put it after --");
  if (o.ps > 0 && o.ps_program.empty()) return absl::InvalidArgumentError("--ps_program is empty");
  // The name prefixes Kubernetes objects and pod hostnames: a DNS label.
  bool dns = !o.name.empty() && absl::ascii_islower(o.name.front()) &&
             (absl::ascii_islower(o.name.back()) || absl::ascii_isdigit(o.name.back()));
  for (char c : o.name) dns = dns && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!dns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--name=", o.name, " is not a DNS label: use lower-case letters, digits and '-', starting with a letter"));
  }
  const std::string longest = absl::StrCat(o.name, "-worker-", o.workers - 1);
  if (longest.size() > 63) {
    return absl::InvalidArgumentError(
        absl::StrCat("--name=", o.name, " is too long: pod name ", longest, " would exceed Kubernetes' 63 characters"));
  }
  if (o.image.empty() || o.image.find_first_of(" \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--image=", YamlQuote(o.image), " is not an image reference"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> KubernetesManifests(const EmitOptions& o) {
  if (absl::Status st = CheckEmitOptions(o); !st.ok()) return st;
  ClusterSpec::JobMap jobs;
  for (const auto& [job, n] : Jobs(o)) {
    for (int i = 0; i < n; ++i)
      jobs[job][i] = absl::StrCat(o.name, "-", job, "-", i, ".", o.name, "-", job, ":", o.port);
  }
  ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromJobs(std::move(jobs)));
  std::string out = absl::StrCat("# distflow cluster for Kubernetes: ", Layout(o), ", every task on port ", o.port,
                                 ".\n# Apply with: kubectl apply -f FILE\n");
  for (const auto& [job, n] : Jobs(o)) {
    absl::StrAppend(&out, "---\n", Service(o, job), "---\n", StatefulSet(o, job, n, cluster));
  }
  return out;
}

absl::StatusOr<std::string> SlurmScript(const EmitOptions& o) {
  if (absl::Status st = CheckEmitOptions(o); !st.ok()) return st;
  const int tasks = o.ps + o.workers;
  const std::string layout = Layout(o);
  const std::string flags = absl::StrCat("--job_layout=", layout, " --cluster_spec=\"$DISTFLOW_CLUSTER_SPEC\"");
  std::string s = absl::StrCat(
      "#!/bin/bash\n", "# distflow cluster for SLURM: ", layout, ", one task per node, each on port ", o.port, ".\n",
      "# Rank r runs on the r-th node of the allocation and derives its task from\n",
      "# SLURM_PROCID and --job_layout. Submit with: sbatch FILE\n", "#SBATCH --job-name=", o.name, "\n",
      "#SBATCH --ntasks=", tasks, "\n", "#SBATCH --nodes=", tasks, "\n", "#SBATCH --ntasks-per-node=1\n",
      "set -euo pipefail\n", ": \"${SLURM_JOB_NODELIST:?submit this script with sbatch}\"\n\n",
      "# The nodes in rank order.\n", "mapfile -t hosts < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\n",
      "if [ \"${#hosts[@]}\" -lt ", tasks, " ]; then\n", "  echo \"distflow: the allocation has ${#hosts[@]} nodes; ",
      layout, " needs ", tasks, " (one task per node)\" >&2\n", "  exit 2\n", "fi\n");
  std::vector<std::string> spec, json;
  int first = 0;
  for (const auto& [job, n] : Jobs(o)) {
    absl::StrAppend(&s, job, "=\"\"\n", job, "_json=\"\"\n", "for ((r = ", first, "; r < ", first + n, "; r++)); do\n",
                    "  ", job, "=\"${", job, ":+$", job, ";}${hosts[r]}:", o.port, "\"\n", "  ", job, "_json=\"${", job,
                    "_json:+$", job, "_json, }\\\"${hosts[r]}:", o.port, "\\\"\"\n", "done\n");
    spec.push_back(absl::StrCat(job, "|$", job));
    json.push_back(absl::StrCat("\\\"", job, "\\\": [$", job, "_json]"));
    first += n;
  }
  absl::StrAppend(&s, "export DISTFLOW_CLUSTER_SPEC=\"", absl::StrJoin(spec, ","), "\"\n",
                  "# The cluster as JSON, for each rank's DISTFLOW_CONFIG (what distflow-launch gives a task).\n",
                  "export DISTFLOW_CLUSTER_JSON=\"{", absl::StrJoin(json, ", "), "}\"\n",
                  "echo \"distflow: cluster $DISTFLOW_CLUSTER_SPEC\"\n\n");
  const std::string ps_ranks = o.ps == 1 ? "rank 0" : absl::StrCat("ranks 0..", o.ps - 1);
  absl::StrAppend(&s, "# What every rank runs: ",
                  o.ps > 0 ? absl::StrCat(ps_ranks, " the ps program, the others the program.") : "the program.",
                  "\n# DISTFLOW_CONFIG names its task, so that a program that reads it (hvd.init()) needs no "
                  "flags.\n",
                  "distflow_task() {\n");
  if (o.ps > 0) {
    absl::StrAppend(&s, "  local job=worker index=$((SLURM_PROCID - ", o.ps, "))\n", "  if [ \"$SLURM_PROCID\" -lt ",
                    o.ps, " ]; then job=ps; index=$SLURM_PROCID; fi\n");
  } else {
    absl::StrAppend(&s, "  local job=worker index=$SLURM_PROCID\n");
  }
  absl::StrAppend(&s,
                  "  export DISTFLOW_CONFIG=\"{\\\"cluster\\\": $DISTFLOW_CLUSTER_JSON, \\\"task\\\": "
                  "{\\\"type\\\": \\\"$job\\\", \\\"index\\\": $index}}\"\n");
  if (o.ps > 0) {
    absl::StrAppend(&s, "  if [ \"$SLURM_PROCID\" -lt ", o.ps, " ]; then\n", "    exec ", ShellWord(o.ps_program), " ",
                    flags, "\n", "  fi\n");
  }
  absl::StrAppend(&s, "  exec ", ShellJoin(o.program), " ", flags, "\n", "}\n", "export -f distflow_task\n",
                  "srun --ntasks=", tasks, " --ntasks-per-node=1 --distribution=block --kill-on-bad-exit=1 ",
                  "bash -c distflow_task\n");
  return s;
}

}  // namespace distflow

// What `distflow-launch --emit` prints: the same cluster shape as a local
// launch (--ps N --workers M, a program for the workers, a ps program), as
// manifests for a cluster manager instead of processes on this machine.
//
//   Kubernetes: per job a headless Service and a StatefulSet whose pods
//   compute their task index from their hostname's ordinal, export
//   DISTFLOW_CONFIG and exec the program with --job_name, --task_index and
//   --cluster_spec; gRPC health probes on the task port. One multi-document
//   YAML text.
//   SLURM: an sbatch script, one task per node; srun starts every rank and
//   each derives its task from SLURM_PROCID through --job_layout; each
//   rank's DISTFLOW_CONFIG also names its task, as distflow-launch's do.
//
// --ps 0 (Horovod-style all-reduce training, no ps) is a cluster of the
// worker job alone: its Service and StatefulSet only, or a script whose
// every rank runs the program; a Horovod program's hvd.init() takes its
// rank from DISTFLOW_CONFIG in either.
//
// Every address a task is given is PREFIX-JOB-I.PREFIX-JOB:PORT (Kubernetes)
// or NODE:PORT (SLURM), so all tasks share one port.
//
// A StatefulSet restarts a pod whose program exits, even with status 0; once
// the chief has reported, delete the objects (kubectl delete -f FILE).
//
// Thread-safety: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace distflow {

struct EmitOptions {
  int ps = 1;
  int workers = 1;
  int port = 2222;
  std::vector<std::string> program;  // the non-ps tasks' program and its arguments
  std::string ps_program = "distflow-server";
  std::string image = "distflow:latest";  // Kubernetes only
  std::string name = "distflow";          // prefix of every object; the SLURM job name
};

// InvalidArgument naming the option that no manifest could express.
absl::Status CheckEmitOptions(const EmitOptions& options);

// Multi-document YAML: Service and StatefulSet of the ps job (if any), then
// those of the worker job.
absl::StatusOr<std::string> KubernetesManifests(const EmitOptions& options);

// A bash script for sbatch.
absl::StatusOr<std::string> SlurmScript(const EmitOptions& options);

}  // namespace distflow

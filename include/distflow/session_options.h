// SessionOptions and RunOptions: how a session runs its steps (threads,
// deadlines, placement on a cluster) and what one Run asks for (a deadline, a
// trace). Plain structs, copyable; see distflow/session.h.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "distflow/export.h"

namespace distflow {

struct StepStats;  // distflow/step_stats.h

struct DISTFLOW_EXPORT SessionOptions {
  int inter_op_threads = 0;          // 0: one per schedulable core
  int intra_op_threads = 0;          // 0: one per schedulable core (the caller's thread counts as one)
  int64_t operation_timeout_ms = 0;  // default per-step deadline; 0: none
  // Variables whose container attribute is empty live in a container private
  // to this session (dropped by Close) unless this is false; then they live
  // in `default_container`, shared with every session that shares it (a
  // cluster task's sessions share "", as in TensorFlow's workers).
  bool session_private_variables = true;
  std::string default_container;
  // The most memory the kernel outputs of one step may hold at once, in
  // bytes (an output that would go over fails the step with
  // RESOURCE_EXHAUSTED naming the node); 0: no limit.
  int64_t max_step_bytes = 0;

  // For sessions on a cluster (grpc:// targets).
  bool allow_soft_placement = false;
  bool log_device_placement = false;
  std::vector<std::string> device_filters;  // e.g. {"/job:ps", "/job:worker/task:1"}
  int64_t wait_for_cluster_ms = 0;          // 0: 300 s
  // A target naming a server in this process calls its master directly (no
  // network between client and master, feeds and fetches not copied), as
  // with TensorFlow's `tf.Session(server.target)`. False: always use gRPC.
  bool in_process_master = true;
};

struct DISTFLOW_EXPORT RunOptions {
  int64_t timeout_ms = 0;  // overrides SessionOptions::operation_timeout_ms when > 0
  // Non-null: trace the step. Each device that runs part of it (every task's,
  // in a cluster) appends when and where each node ran (distflow/step_stats.h;
  // ChromeTraceJson makes a timeline of it). Must outlive the run.
  StepStats* trace = nullptr;
};

}  // namespace distflow

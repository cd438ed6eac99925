// The flags of mnist_distributed (defined in mnist_distributed_flags.cc) that its
// other files read. Flags are process-wide; read them only from main's thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int, train_steps);
ABSL_DECLARE_FLAG(int, batch_size);
ABSL_DECLARE_FLAG(double, learning_rate);
ABSL_DECLARE_FLAG(bool, fused_adam);
ABSL_DECLARE_FLAG(std::string, data_dir);
ABSL_DECLARE_FLAG(std::string, logdir);
ABSL_DECLARE_FLAG(int, save_checkpoint_steps);
ABSL_DECLARE_FLAG(int, print_every);
ABSL_DECLARE_FLAG(double, min_accuracy);
ABSL_DECLARE_FLAG(bool, start_server);
ABSL_DECLARE_FLAG(bool, shutdown_cluster);
ABSL_DECLARE_FLAG(int, status_port);
ABSL_DECLARE_FLAG(int, intra_op_threads);
ABSL_DECLARE_FLAG(int, stop_grace_secs);
ABSL_DECLARE_FLAG(double, heartbeat_timeout_secs);
ABSL_DECLARE_FLAG(double, orphan_grace_secs);
ABSL_DECLARE_FLAG(double, recovery_timeout_secs);
ABSL_DECLARE_FLAG(std::string, job_name);
ABSL_DECLARE_FLAG(std::string, task_index);
ABSL_DECLARE_FLAG(std::string, ps_hosts);
ABSL_DECLARE_FLAG(std::string, worker_hosts);
ABSL_DECLARE_FLAG(std::string, cluster_spec);
ABSL_DECLARE_FLAG(std::string, job_layout);
ABSL_DECLARE_FLAG(std::string, join);
ABSL_DECLARE_FLAG(std::string, join_as);

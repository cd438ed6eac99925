// The flags of mnist_distributed that more than one of its files reads
// (declared in mnist_distributed_flags.h); the rest are defined next to
// their one reader, mnist_distributed.cc.
#include "mnist_distributed_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "distflow/data/mnist.h"

ABSL_FLAG(std::string, model, "cnn", "cnn (the book's network) or softmax");
ABSL_FLAG(int, train_steps, 5000, "stop when the global step reaches this");
ABSL_FLAG(int, batch_size, 50, "examples per step");
ABSL_FLAG(double, learning_rate, 1e-3, "Adam learning rate");
ABSL_FLAG(bool, fused_adam, true,
          "update the variables of each ps task with one FusedApplyAdam (false: one ApplyAdam per variable)");
ABSL_FLAG(std::string, data_dir, distflow::data::kDefaultFashionMnistDir, "directory of the IDX files");
ABSL_FLAG(std::string, logdir, "", "checkpoint directory (empty: no checkpoints)");
ABSL_FLAG(int, save_checkpoint_steps, 500, "the chief saves a checkpoint every this many global steps");
ABSL_FLAG(int, print_every, 100, "print when the global step crosses a multiple of this");
ABSL_FLAG(double, min_accuracy, 0.0, "the chief exits 3 if test accuracy ends below this");
ABSL_FLAG(bool, start_server, true, "run this worker task's server in this process, as the book does");
ABSL_FLAG(bool, shutdown_cluster, true, "the chief stops every task when all workers are done");
ABSL_FLAG(int, status_port, -1,
          "serve this task's status page (/status) and Prometheus metrics (/metrics) over HTTP on this port: "
          "0 = any free one, -1 = off; the chief's page draws loss and accuracy");
ABSL_FLAG(
    int, intra_op_threads, 0,
    "threads of one op in this task's server (0: its share of the cores: those it may use / the tasks on its host)");
ABSL_FLAG(int, stop_grace_secs, 25,
          "after a SIGTERM, how long a worker may take to finish its step and leave (the chief: to stop the "
          "workers, save and end the cluster) before it exits 1 anyway; below the SIGKILL grace of the "
          "launcher or Kubernetes");
ABSL_FLAG(double, heartbeat_timeout_secs, 10,
          "a task silent this long is declared dead and steps waiting on it fail naming it (0: no failure detection)");
ABSL_FLAG(double, orphan_grace_secs, 60,
          "the ps gives up (exits 1) this long after its chief died without coming back, or every worker died");
ABSL_FLAG(double, recovery_timeout_secs, 300,
          "a worker whose step failed because a task died waits this long in all for the cluster to come back "
          "(a restarted task is recovered from the last checkpoint), then exits 1 naming what it waited for");
ABSL_FLAG(std::string, job_name, "", "ps or worker (default: worker, unless DISTFLOW_CONFIG or --job_layout says)");
ABSL_FLAG(
    std::string, task_index, "",
    "this task's index in its job; worker 0 is the chief (default: 0, unless DISTFLOW_CONFIG or --job_layout says)");
ABSL_FLAG(std::string, ps_hosts, "", "comma-separated host:port of the ps tasks (default localhost:2222)");
ABSL_FLAG(std::string, worker_hosts, "",
          "comma-separated host:port of the worker tasks (default localhost:2223,localhost:2224,localhost:2225)");
ABSL_FLAG(std::string, cluster_spec, "", "the whole cluster, as for distflow-server (instead of the *_hosts flags)");
ABSL_FLAG(std::string, job_layout, "",
          "jobs in rank order, e.g. ps:1,worker:3: the task is the one of rank SLURM_PROCID, "
          "OMPI_COMM_WORLD_RANK or PMI_RANK (rank 0 is ps 0, ranks 1..3 workers 0..2)");
ABSL_FLAG(std::string, join, "",
          "host:port of the running job's coordinator (ps task 0): join that job as a new worker instead of "
          "taking a task of the cluster spec (asynchronous training, or --sync_replicas of a job started with "
          "--elastic; needs --join_as)");
ABSL_FLAG(std::string, join_as, "", "with --join: host:port this worker serves on");

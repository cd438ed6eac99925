// Parts of the book's distributed example (mnist_distributed) that its ps
// training and its all-reduce training share: the network, this task's
// server, the worker's shard of Fashion-MNIST, the test evaluation and the
// exit helpers. Nothing here keeps state; call from main's thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/data/mnist.h"
#include "distflow/distflow.h"
#include "distflow/task_config.h"

namespace mnist_distributed {

// Prints "what: status" to stderr and returns exit code 1.
int Die(const std::string& what, const absl::Status& s);
// Prints "mnist_distributed: what" to stderr and returns exit code 2 (bad usage).
int Usage(const std::string& what);

// The book's CNN (--model=cnn) or a softmax layer (--model=softmax): logits [N, 10].
distflow::Output Network(const distflow::Scope& s, const distflow::Output& images, const std::string& model);

// This task's server options: threads, status page and failure detection from the flags.
distflow::ServerOptions BaseServerOptions();

// A worker's own server, started (with --start_server; else null), and the
// session target for this worker: the server's, or grpc://address.
struct WorkerServer {
  std::unique_ptr<distflow::Server> server;
  std::string target;
};
absl::StatusOr<WorkerServer> StartWorkerServer(const distflow::ClusterSpec& cluster, int task,
                                               const std::string& address);

// The training examples of worker `task` of `num_workers`: shard task % num_workers of
// Fashion-MNIST's training split (every num_workers-th example from the task's
// index on, as tf.data's shard), read from --data_dir; the test split only
// when `with_test_set` (the chief's evaluation). Batches are shuffled from a
// seed of the task's.
absl::StatusOr<distflow::data::DataSets> ReadWorkerShard(int task, int num_workers, bool with_test_set);
// Shard `shard` of `num_shards` of the training set (tf.data's
// shard(num_shards, shard)), walked in an order seeded by `task`.
absl::StatusOr<distflow::data::DataSets> ReadShard(int shard, int num_shards, int task, bool with_test_set);

// The shard a worker takes in the job as its coordinator (at
// `coordinator_address`) holds it now: {its position among the workers
// that are alive or not heard from yet (not dead, not left) by task index,
// their count}. NotFound if the coordinator does not hold `task` as such.
absl::StatusOr<std::pair<int, int>> LiveShard(const std::string& coordinator_address, int task);

// The accuracy over `test` of `accuracy` fed with `images`/`labels`, in chunks of 1000 examples.
absl::StatusOr<double> TestAccuracy(distflow::Session* session, const distflow::Output& images,
                                    const distflow::Output& labels, const distflow::Output& accuracy,
                                    const distflow::data::DataSet& test);

// This task and its cluster (see cluster/task_config.cc): the cluster from
// --cluster_spec or --ps_hosts/--worker_hosts, the task from --job_name and
// --task_index, DISTFLOW_CONFIG, or a rank placed by --job_layout; the book's
// cluster and worker 0 where nothing says (mnist_distributed_task.cc).
absl::StatusOr<distflow::TaskConfig> ResolveTask();

// A worker joining a running job (--join): its task and the cluster come
// from the job's coordinator.
absl::StatusOr<distflow::TaskConfig> JoinRunningJob();

// The workers that joined the running job and are still in it, as the
// coordinator at `coordinator` says (none when it cannot be asked);
// `*joined_total` becomes at least the number that ever joined.
std::vector<std::string> JoinedWorkersStillIn(const std::string& coordinator, int* joined_total);

// The job's stop flag: an int64 variable on the first ps task that a chief
// told to stop, or a ps told to stop, sets to 1; every worker reads it after
// its step and leaves once it is set (mnist_distributed_ps.cc).
inline constexpr char kStopFlagName[] = "stop_workers";
std::string StopFlagDevice(const distflow::ClusterSpec& cluster);

// The ps task: serves until the chief shuts the cluster down. On SIGTERM it
// sets the stop flag, keeps serving while the chief stops the workers, saves
// and ends the cluster, and exits 0 (1 if that takes over --stop_grace_secs).
int RunPs(const distflow::ClusterSpec& cluster, int task, const std::string& address);

// --all_reduce training (mnist_distributed_all_reduce.cc): every worker holds
// the variables and averages its gradients by collective all-reduce. `data`
// is this worker's shard. Returns the process's exit code.
int RunAllReduce(const distflow::ClusterSpec& cluster, int task, distflow::data::DataSets& data,
                 WorkerServer worker_server);

}  // namespace mnist_distributed

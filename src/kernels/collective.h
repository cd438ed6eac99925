// CollectiveExecutor: what the collective kernels (CollectiveReduce,
// CollectiveBcastSend/Recv, CollectiveGather; kernels/cpu/collective_kernels.cc)
// hand their tensor to. The kernels sit below the runtime and the transport,
// so they see only this interface; the implementation
// (collective/collective_executor_impl.h) pairs a kernel's contribution with
// its peers' and moves the bytes through a CollectiveTransport, which on a
// server is the worker's transport seam (worker/worker_collective_transport.h).
//
// Executors are found by device: a server's Worker registers one for its
// device while it lives (RegisterCollectiveExecutor). A device without one (a
// plain local session) runs only groups of size 1. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cancellation.h"
#include "distflow/tensor.h"

namespace distflow {

class Device;
struct NodeExecStats;

enum class CollectiveKind { kReduce, kBroadcastSend, kBroadcastRecv, kGather };
// kAdasum: Horovod's adaptive summation (collective/adasum.h), float32 and
// float64 only; it is not an element-wise merge.
enum class MergeOp { kAdd, kMul, kMax, kMin, kAdasum };
enum class FinalOp { kId, kDiv };

// One collective op's attributes, as TensorFlow spells them.
struct CollectiveParams {
  CollectiveKind kind = CollectiveKind::kReduce;
  std::string node_name;  // for errors
  int group_size = 1;
  // distflow's group_members (Horovod's process sets): the tasks of the
  // job, by index, that form the group, in rank order (group_size of them,
  // distinct). Empty: tasks 0..group_size-1.
  std::vector<int> members;
  // distflow's group_tasks: the group's tasks by full name, of any jobs
  // ("/job:ps/task:0", "/job:worker/task:1"), in rank order (group_size of
  // them, distinct); resolved against the cluster when the op runs. Empty:
  // `members`, or tasks 0..group_size-1 of the op's own job.
  std::vector<std::string> member_tasks;
  int64_t group_key = 0;
  int64_t instance_key = 0;
  MergeOp merge_op = MergeOp::kAdd;
  FinalOp final_op = FinalOp::kId;
  DataType dtype = DT_FLOAT;
  TensorShape shape;           // CollectiveBcastRecv: what arrives
  double timeout_seconds = 0;  // 0: none (the step's own deadline still holds)
  // CollectiveReduce's compression="fp16" (Horovod's Compression.fp16): a
  // float32/float64 reduction travels and is rounded as fp16
  // (collective/fp16_channel.h); other dtypes ignore it, as Horovod's does.
  bool compress_fp16 = false;
  // CollectiveReduce's fusion_cycle_ms > 0 (Horovod's cycle time): the
  // executor fuses this reduction at run time with others of its stream
  // that become ready within one cycle (collective/fusion_buffer.h), up to
  // fusion_threshold_bytes (0: no limit) and at once when fusion_set_size
  // of them wait (0: unknown). 0: reduced alone.
  double fusion_cycle_ms = 0;
  int64_t fusion_threshold_bytes = 0;
  int64_t fusion_set_size = 0;
  // CollectiveBcastSend's from_group_root: every rank runs the op and the
  // group's root (the rank its state comes from, chosen when the group was
  // last built; rank 0 at the start) is the sender.
  bool from_group_root = false;
  // CollectiveBcastSend's root_rank (distflow's; Horovod's root_rank when
  // every rank runs the op): rank root_rank of the group sends, the others
  // receive. -1: the op's own rank sends.
  int root_rank = -1;
  // Set by the executor, not by the kernel: the generation of the group the
  // run belongs to (collective/collective_executor_impl.h). Runs of
  // different generations never pair.
  int64_t generation = 0;
  // Set by the executor for a run of the elastic group (the kernel's
  // group_size 0: the job's live tasks, decided at run time): `members` then
  // holds the task indices of the group's last build in rank order, and
  // group_size their count.
  bool elastic = false;
  // Set by the kernel when its step is traced: where the run's phases go
  // (collective/run_observer.h). Empty: not traced.
  std::function<void(const NodeExecStats&)> trace;
};

// "CollectiveReduce 'name' (group 1, instance 7)": how errors name an op.
std::string DescribeCollective(const CollectiveParams& p);
const char* CollectiveKindName(CollectiveKind k);
// What `what` (a run of a collective) fails with when its step's
// cancellation ends it: "<what>: the step was cancelled: <reason>", in the
// code of the reason `cm` was cancelled with (the step's first error), or
// Cancelled when there is none. The run's channel is aborted with it, so
// the peers' runs fail naming the root cause (a rank that died), not the
// rank whose step was cancelled.
absl::Status StepCancelledError(const std::string& what, const CancellationManager* cm);
absl::StatusOr<MergeOp> ParseMergeOp(const std::string& s);
absl::StatusOr<FinalOp> ParseFinalOp(const std::string& s);
// group_members and group_tasks checked against group_size (empty is
// fine): InvalidArgument naming the op and the culprit.
absl::Status CheckGroupMembers(const CollectiveParams& p);
// The members of a group: `members`, or 0..group_size-1 when empty.
std::vector<int> GroupMembers(const CollectiveParams& p);

class CollectiveExecutor {
 public:
  using DoneCallback = std::function<void(absl::StatusOr<Tensor>)>;
  virtual ~CollectiveExecutor() = default;
  // Runs one collective: `input` is this rank's contribution (empty for
  // CollectiveBcastRecv); `done` gets the result, once, on any thread.
  // Cancelling `cm` (may be null) fails the collective here and on its peers.
  virtual void Run(const CollectiveParams& params, const Tensor& input, CancellationManager* cm, DoneCallback done) = 0;
};

// The executor of `device`, or null. The registry keeps no ownership: the
// registrant unregisters before the executor goes.
void RegisterCollectiveExecutor(const Device* device, std::shared_ptr<CollectiveExecutor> executor);
void UnregisterCollectiveExecutor(const Device* device);
std::shared_ptr<CollectiveExecutor> CollectiveExecutorFor(const Device* device);

// The whole computation of a group of one (no peers): `input` merged with
// nothing, then the final op (Div divides by 1). Also what ranks of larger
// groups apply after merging.
absl::StatusOr<Tensor> RunGroupOfOne(const CollectiveParams& params, const Tensor& input);

}  // namespace distflow

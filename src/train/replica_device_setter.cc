#include "distflow/train/replica_device_setter.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "cluster/device_name.h"

namespace distflow {

int64_t VariableBytes(const NodeInfo& node) {
  int64_t elements = 1;
  if (!node.shape.unknown_rank()) {
    for (int i = 0; i < node.shape.rank(); ++i) elements *= std::max<int64_t>(node.shape.dim(i), 1);
  }
  return elements * static_cast<int64_t>(node.dtype != DT_INVALID ? DataTypeSize(node.dtype) : 4);
}

DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, ReplicaDeviceSetterOptions options) {
  struct State {
    std::vector<int> ps_tasks;
    std::vector<int64_t> load;  // bytes per entry of ps_tasks
    size_t next = 0;
  };
  auto state = std::make_shared<State>();
  state->ps_tasks = cluster.task_indices(options.ps_job);
  state->load.assign(state->ps_tasks.size(), 0);
  // An unparsable worker device is kept as written, for the placer to report.
  absl::StatusOr<DeviceName> worker = DeviceName::Parse(options.worker_device);
  return [state, options, worker](const NodeInfo& node) -> std::string {
    absl::StatusOr<DeviceName> current = DeviceName::Parse(node.device);
    if (!current.ok()) return node.device;
    const bool ps_op = std::find(options.ps_ops.begin(), options.ps_ops.end(), node.op) != options.ps_ops.end();
    if (ps_op && !state->ps_tasks.empty()) {
      DeviceName ps;
      ps.has_job = true;
      ps.job = options.ps_job;
      if (!current->has_job || current->job == options.ps_job) {
        size_t pick;
        if (options.strategy == PsStrategy::kGreedyBytes) {
          pick = static_cast<size_t>(std::min_element(state->load.begin(), state->load.end()) - state->load.begin());
          state->load[pick] += VariableBytes(node);
        } else {
          pick = state->next++ % state->ps_tasks.size();
        }
        ps.has_task = true;
        ps.task = state->ps_tasks[pick];
      }
      return DeviceName::MergeInner(ps, *current).ToString();
    }
    if (!worker.ok()) return options.worker_device;
    return DeviceName::MergeInner(*worker, *current).ToString();
  };
}

DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, const std::string& worker_device,
                                   const std::string& ps_job) {
  ReplicaDeviceSetterOptions o;
  o.worker_device = worker_device;
  o.ps_job = ps_job;
  return ReplicaDeviceSetter(cluster, std::move(o));
}

}  // namespace distflow

#include "train/replica_device_setter.h"

#include <memory>

#include "absl/strings/str_cat.h"

namespace distflow {

DeviceFunction ReplicaDeviceSetter(const ClusterSpec& cluster, const std::string& worker_device,
                                   const std::string& ps_job) {
  std::vector<int> ps_tasks = cluster.task_indices(ps_job);
  auto next = std::make_shared<size_t>(0);
  return [ps_tasks, next, worker_device, ps_job](const proto::NodeDef& node) -> std::string {
    if (node.op() == "Variable" && !ps_tasks.empty()) {
      int task = ps_tasks[(*next)++ % ps_tasks.size()];
      return absl::StrCat("/job:", ps_job, "/task:", task);
    }
    return worker_device;
  };
}

}  // namespace distflow

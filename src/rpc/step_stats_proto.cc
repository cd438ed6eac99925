#include "rpc/step_stats_proto.h"

namespace distflow {

void AppendStepStatsProto(const StepStats& stats, proto::StepStats* out) {
  for (const DeviceStepStats& d : stats.devices) {
    proto::DeviceStepStats* pd = out->add_dev_stats();
    pd->set_device(d.device);
    for (const NodeExecStats& n : d.nodes) {
      proto::NodeExecStats* pn = pd->add_node_stats();
      pn->set_node_name(n.node);
      pn->set_op(n.op);
      pn->set_start_us(n.start_us);
      pn->set_end_us(n.end_us);
      pn->set_transfer_key(n.transfer_key);
    }
  }
}

void AppendStepStats(const proto::StepStats& in, StepStats* out) {
  for (const proto::DeviceStepStats& pd : in.dev_stats()) {
    DeviceStepStats d;
    d.device = pd.device();
    d.nodes.reserve(static_cast<size_t>(pd.node_stats_size()));
    for (const proto::NodeExecStats& pn : pd.node_stats()) {
      d.nodes.push_back({pn.node_name(), pn.op(), pn.start_us(), pn.end_us(), pn.transfer_key()});
    }
    out->devices.push_back(std::move(d));
  }
}

}  // namespace distflow

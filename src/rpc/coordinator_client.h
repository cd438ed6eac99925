// The calls a task makes to its job's coordinator (coordination/): a
// heartbeat, a rejoin once the coordinator restarted and forgot the task,
// and the rendezvous that rebuilds a collective group.
// They are the gRPC half of the coordination agent, which therefore speaks
// no gRPC (tests/transport_seam_test.sh checks it).
//
// Thread-safe: every call is independent. `peers` must outlive the call.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/elastic.pb.h"
#include "proto/worker.pb.h"

namespace distflow {

class WorkerCache;

// WorkerService.Heartbeat to `coordinator` (a task name of `peers`'
// cluster), bounded by `timeout`. The status of the call, or why there is no
// channel to the coordinator.
absl::Status CoordinatorHeartbeat(WorkerCache* peers, const std::string& coordinator,
                                  const proto::HeartbeatRequest& req, proto::HeartbeatResponse* resp,
                                  absl::Duration timeout);

// ElasticService.Rejoin to `coordinator`, bounded by `timeout`.
absl::Status CoordinatorRejoin(WorkerCache* peers, const std::string& coordinator, const proto::RejoinRequest& req,
                               absl::Duration timeout);

// ElasticService.GroupRendezvous to `coordinator`, bounded by `timeout`.
absl::Status CoordinatorGroupRendezvous(WorkerCache* peers, const std::string& coordinator,
                                        const proto::GroupRendezvousRequest& req, proto::GroupRendezvousResponse* resp,
                                        absl::Duration timeout);

}  // namespace distflow

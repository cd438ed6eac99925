// The client half of elastic membership inside a server: how a task finds
// the address of a task that joined the running job (not in its spec).
// The public calls (JoinCluster, ListClusterMembers) are in
// include/distflow/elastic.h; both are implemented in elastic_client.cc.
#pragma once

#include <string>

#include "rpc/worker_cache.h"

namespace distflow {

class CoordinationService;

// Looks a task up in `local` (this task is the coordinator), else asks the
// coordinator task `coordinator` through `peers` (2 s per call).
WorkerCache::AddressResolver JoinedTaskResolver(CoordinationService* local, WorkerCache* peers,
                                                std::string coordinator);

}  // namespace distflow

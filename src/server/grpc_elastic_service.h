// The ElasticService over gRPC (proto/elastic.proto), served by the
// coordinator task only: Join hands a joining worker its task index and the
// cluster as it is now, and tells this task's WorkerCache the joiner's
// address; Members lists every task the coordinator knows. Each call checks
// the caller's cluster token (auth.h). Thread-safe; `service` and `workers`
// must outlive it.
#pragma once

#include <memory>
#include <string>

namespace grpc {
class Service;
}  // namespace grpc

namespace distflow {

class CoordinationService;
class WorkerCache;

std::unique_ptr<grpc::Service> NewGrpcElasticService(CoordinationService* service, WorkerCache* workers,
                                                     std::string auth_token, std::string task_name);

}  // namespace distflow

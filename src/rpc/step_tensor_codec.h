// The tensor codec of the client <-> master leg: how a RunStep's feeds and
// fetches travel. Small tensors ride inside the messages; large ones wait on
// the master's bulk port under a ticket (put there by a remote client, or
// handed over in memory by a client in the same process), and large fetches
// are offered there if the client accepts that. The master step calls only
// these functions, so what a ticket is stays here and in bulk_transfer.h.
// Stateless; thread-safe as BulkServer is.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "distflow/tensor.h"
#include "proto/master.pb.h"

namespace distflow {

class BulkServer;

// The feed `f` (canonically `name`) if its bytes wait on `bulk`, taken off
// it; nullopt if they are inside the request. `local_task` names this task
// in the error when bulk transfer is off here (`bulk` null).
absl::StatusOr<std::optional<Tensor>> TakeBulkFeed(BulkServer* bulk, const proto::NamedTensor& f,
                                                   const std::string& name, const std::string& local_task);
// Drops what the request's feeds left on `bulk` (may be null): its step will
// not take them.
void ReleaseBulkFeeds(BulkServer* bulk, const proto::RunStepRequest& req);
// A fetched tensor into the answer: offered on `bulk` if it is large and the
// client accepts that, otherwise encoded inside.
void EncodeFetch(BulkServer* bulk, bool client_accepts_bulk, const std::string& name, const Tensor& t,
                 proto::NamedTensor* out);
// The port a client puts large feeds on (0: none).
int BulkPortOf(const BulkServer* bulk);

}  // namespace distflow

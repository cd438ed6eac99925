// BundleTransfers lets the tensors of one step that cross from one task to
// one partition travel in as few RecvTensor calls as is safe: it groups the
// partitions' _Recv nodes by (sending task, receiving device) into bundles
// and names each bundle's keys in its members' `bundle` attr; at run time
// the first receive of a bundle fetches all of it in one call
// (WorkerRendezvous::RecvBundleAsync), which the sender answers once every
// member has been sent.
//
// Waiting for a whole bundle must not deadlock the step: a tensor joins a
// bundle only if nothing it depends on waits (through any partition) for
// that bundle, and nothing that waits for it is needed by the bundle. The
// pass models each bundle as a node that every member's _Send precedes and
// every member's _Recv follows, and keeps that graph acyclic; tensors are
// considered in dependency order, so the tensors ready early in a step
// (fed ids, variable reads) and those ready late (gradients) form separate
// bundles. Large tensors of a known shape stay out of bundles (they may take
// the bulk port). Only for steps without control flow (the partitioner's
// caller decides).
//
// Then bundles going opposite ways between two tasks are paired into one
// call: a bundle task A sends task W rides with A's fetch of a bundle from
// W that depends on it (a push: the rows a ps looked up go to the worker
// inside the ps's request for the gradients computed from them). The
// fetching receives carry a `push` attr (the riding keys; their `bundle`
// attr is set even for a bundle of one), the riding ones `pushed` (they
// wait for the push and make no call). A large tensor rides too, with a
// fetch that carries a push between the same two tasks and needs it (its
// bytes then follow a bulk ticket in the request). Stateless; thread-safe.
#pragma once

#include <map>
#include <string>

#include "placement/partition.h"

namespace distflow {

// Sets the `bundle` attr of the _Recv nodes of `parts` that travel together.
void BundleTransfers(std::map<std::string, Partition>* parts);

}  // namespace distflow

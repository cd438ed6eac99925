// PrefetchVariableReads: asynchronous training whose workers read the
// variables of their next step while they compute the current one.
//
//   Operation train = *adam.Minimize(scope, loss, &global_step);
//   Operation step = PrefetchVariableReads(scope, train);  // run `step` instead of `train`
//   while (!session->ShouldStop()) session->Run(feeds, {}, {step});
//
// A step that runs the returned op lets each worker answer its receives of
// the variables that `train` updates (a model's weights read from a ps
// task) with the values its previous step received, while this step's
// values travel: the transfer overlaps the compute, and a step no longer
// waits for the ps before it starts. The price is bounded staleness of one
// step: a worker's step k computes its gradients on the weights its step
// k - 1 read, so they miss (at most) the updates applied during step k - 1,
// its own among them. Asynchronous training already computes on weights
// other workers are updating; one step more is within what it tolerates
// (docs/PERFORMANCE.md, "Prefetching the next step's variables", measures
// the accuracy). Do not use it where every step must see the previous
// one's updates: synchronous replicas (SyncReplicasOptimizer), or a
// program that assigns a variable and reads it in its next step. Running
// `train` itself turns prefetching off; so does a step of another
// signature between two steps (the first step after it reads afresh).
#pragma once

#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

// A NoOp that runs after `train` and asks for prefetched variable reads
// in the steps that run it.
DISTFLOW_EXPORT Operation PrefetchVariableReads(const Scope& scope, const Operation& train);

}  // namespace distflow

// DeferVariableUpdates: asynchronous training whose steps end without
// waiting for the ps to apply their gradients.
//
//   Operation train = *adam.Minimize(scope, loss, &global_step);
//   Operation step = DeferVariableUpdates(scope, train);  // run `step` instead of `train`
//   while (!session->ShouldStop()) session->Run(feeds, {}, {step});
//
// A step that runs the returned op lets each ps task answer it as soon as
// everything the step's other tasks need from it has been sent and every
// gradient it receives has arrived; the updates (`train`'s Apply ops, the
// global step's increment) then run on the ps in the background while the
// worker starts its next step. The price is bounded staleness of one step:
// a worker's step k + 1 may read variables before step k's updates are in
// them, never before step k - 1's (each ps task holds the answer of step
// k + 1 until step k's updates have ended: at most one step's updates in
// flight per session and task). With PrefetchVariableReads as well, a
// step's weights may lack the worker's last two updates.
//
// What stays exact: a step that reads a variable after `train` on the
// variable's own task sees the update (that read is part of the step's
// answer); a step of the session that does not defer (another signature,
// `train` itself, a traced step) starts on each ps task after the
// session's deferred updates there have ended, and a checkpoint after
// every session's; closing the session, deregistering its graphs and a
// clean shutdown of the ps wait for them too. A deferred update that fails
// is logged, counted (distflow_deferred_update_failures_total on the ps's
// /metrics) and fails the session's next step on that task.
//
// Only variable updates and stateless computations are deferred: a step
// whose remaining work on a task does anything else (a synchronous
// replica's accumulators and token queue) runs as if it had not asked, and
// the master logs why. Do not use it where every step must see the
// previous one's updates.
#pragma once

#include "distflow/export.h"
#include "distflow/scope.h"

namespace distflow {

// A NoOp that runs after `train` and asks for deferred variable updates in
// the steps that run it.
DISTFLOW_EXPORT Operation DeferVariableUpdates(const Scope& scope, const Operation& train);

}  // namespace distflow

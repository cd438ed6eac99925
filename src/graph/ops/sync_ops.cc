// Ops of synchronous replicated training (train/sync_replicas_optimizer.h).
//
// A conditional accumulator (one per variable, on the variable's task)
// collects the workers' gradients for the current global step and drops the
// ones computed at an older step; the chief takes their average once
// `num_required` have arrived, which advances the accumulator's step. A step
// barrier (one, on the global step's task) holds each worker until the chief
// has applied the step the worker contributed to.
//
// Both are resources named by `shared_name` in `container` (empty: the
// session's default container), created by whichever op touches them first;
// they stay uninitialised, dropping every gradient, until the chief sets
// their step (AccumulatorSetGlobalStep, SyncBarrierRelease).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status ScalarInput(InferenceContext* c, int i, const char* what) {
  if (c->input(i).rank() > 0) {
    return absl::InvalidArgumentError(absl::StrCat("'", what, "' must be a scalar, got ", c->input(i).DebugString()));
  }
  return absl::OkStatus();
}

absl::Status PositiveAttr(InferenceContext* c, const char* attr) {
  ASSIGN_OR_RETURN(int64_t v, GetAttrInt(c->node(), attr));
  if (v < 1) return absl::InvalidArgumentError(absl::StrCat("'", attr, "' must be at least 1, got ", v));
  return absl::OkStatus();
}

// The accumulator ops that need `num_required` come twice: as `name` with it
// as an attribute (TensorFlow's ops), and as `name`V2 with it as their first
// input, so the chief can follow a changing membership (elastic synchronous
// training: the SyncReplicasOptimizer's live_replicas) step by step. Both have
// `outputs`, the accumulator's attributes and then `more_attrs`;
// `set_outputs` gives the outputs' shapes once num_required is checked.
void RegisterWithNumRequired(OpRegistry* r, const std::string& name, const std::vector<std::string>& outputs,
                             const std::vector<std::string>& more_attrs, ShapeFn set_outputs) {
  for (const bool v2 : {false, true}) {
    OpDefBuilder b(v2 ? name + "V2" : name);
    if (v2) b.Input("num_required: int64");
    for (const std::string& o : outputs) b.Output(o);
    b.Attr("T: {float, double}").Attr("shared_name: string").Attr("container: string = ''");
    if (!v2) b.Attr("num_required: int");
    for (const std::string& a : more_attrs) b.Attr(a);
    b.SetIsStateful().SetShapeFn([v2, set_outputs](InferenceContext* c) {
      RETURN_IF_ERROR(v2 ? ScalarInput(c, 0, "num_required") : PositiveAttr(c, "num_required"));
      return set_outputs(c);
    });
    r->MustRegister(b);
  }
}

}  // namespace

void RegisterSyncOps(OpRegistry* r) {
  // Adds `gradient` to the accumulator if `local_step` (the global step the
  // worker computed it at) is not older than the accumulator's step, and if
  // `replica_id` has not contributed to this step yet; otherwise drops and
  // counts it.
  r->MustRegister(OpDefBuilder("AccumulatorApplyGradient")
                      .Input("local_step: int64")
                      .Input("gradient: T")
                      .Attr("T: {float, double}")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .Attr("replica_id: int")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return ScalarInput(c, 0, "local_step"); }));
  // True once the accumulator is initialised and holds `num_required`
  // gradients; false if that has not happened within `timeout_ms`. Consumes
  // nothing.
  RegisterWithNumRequired(r, "AccumulatorWaitReady", {"ready: bool"}, {"timeout_ms: int = 1000"}, ScalarShape);
  // The average of the accumulated gradients (at least `num_required`, else
  // FailedPrecondition) and how many were dropped since the last take;
  // resets the accumulator and advances its step by one.
  RegisterWithNumRequired(r, "AccumulatorTakeGradient", {"average: T", "dropped: int64"}, {}, [](InferenceContext* c) {
    c->set_output(0, PartialShape::Unknown());
    c->set_output(1, PartialShape::Scalar());
    return absl::OkStatus();
  });
  // AccumulatorApplyGradient for a sparse gradient (TF's
  // SparseAccumulatorApplyGradient): row values[i] belongs to row indices[i]
  // of a num_rows-row tensor. Only these rows travel to the accumulator.
  r->MustRegister(OpDefBuilder("SparseAccumulatorApplyGradient")
                      .Input("local_step: int64")
                      .Input("gradient_indices: int64")
                      .Input("gradient_values: T")
                      .Input("gradient_num_rows: int64")
                      .Attr("T: {float, double}")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .Attr("replica_id: int")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(ScalarInput(c, 0, "local_step"));
                        return ScalarInput(c, 3, "gradient_num_rows");
                      }));
  // AccumulatorTakeGradient for sparse gradients (TF's
  // SparseAccumulatorTakeGradient): the distinct indices in increasing
  // order, their rows averaged over the gradients taken, the row count, and
  // how many gradients were dropped since the last take.
  RegisterWithNumRequired(r, "SparseAccumulatorTakeGradient",
                          {"indices: int64", "values: T", "num_rows: int64", "dropped: int64"}, {},
                          [](InferenceContext* c) {
                            c->set_output(0, PartialShape({PartialShape::kUnknownDim}));
                            c->set_output(1, PartialShape::Unknown());
                            c->set_output(2, PartialShape::Scalar());
                            c->set_output(3, PartialShape::Scalar());
                            return absl::OkStatus();
                          });
  // Initialises the accumulator at `new_step`; gradients accumulated for
  // another step are dropped.
  r->MustRegister(OpDefBuilder("AccumulatorSetGlobalStep")
                      .Input("new_step: int64")
                      .Attr("T: {float, double}")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return ScalarInput(c, 0, "new_step"); }));
  // The global step replica `replica_id` works at: the step the barrier last
  // released it into, or the barrier's step for a replica it has not seen;
  // -1 before the chief initialised the barrier.
  r->MustRegister(OpDefBuilder("SyncBarrierLocalStep")
                      .Output("local_step: int64")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .Attr("replica_id: int")
                      .SetIsStateful()
                      .SetShapeFn(ScalarShape));
  // Reports that replica `replica_id` has sent its gradients for
  // `local_step`, then waits until the barrier's step is another one (the
  // chief applied the step, or restored an older one) and outputs it. After
  // `timeout_ms`, DeadlineExceeded naming the step and the replicas that did
  // not report.
  r->MustRegister(OpDefBuilder("SyncBarrierWait")
                      .Input("local_step: int64")
                      .Output("step: int64")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .Attr("replica_id: int")
                      .Attr("replicas_to_aggregate: int")
                      .Attr("total_num_replicas: int")
                      .Attr("timeout_ms: int")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(ScalarInput(c, 0, "local_step"));
                        RETURN_IF_ERROR(PositiveAttr(c, "total_num_replicas"));
                        RETURN_IF_ERROR(PositiveAttr(c, "timeout_ms"));
                        return ScalarShape(c);
                      }));
  // Sets the barrier's step to `step` (initialising it) and releases every
  // worker waiting at another step.
  r->MustRegister(OpDefBuilder("SyncBarrierRelease")
                      .Input("step: int64")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return ScalarInput(c, 0, "step"); }));
  // The barrier's step (-1 if uninitialised) and the replicas that have
  // reported for it, for the chief's progress messages.
  r->MustRegister(OpDefBuilder("SyncBarrierStatus")
                      .Output("step: int64")
                      .Output("reported: int64")
                      .Attr("shared_name: string")
                      .Attr("container: string = ''")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        c->set_output(0, PartialShape::Scalar());
                        c->set_output(1, PartialShape({-1}));
                        return absl::OkStatus();
                      }));
}

}  // namespace distflow

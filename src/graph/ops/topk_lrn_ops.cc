// Top-k and local response normalisation (TensorFlow 1.x semantics):
// TopKV2 (the k largest entries of each last-dimension row, and their
// indices, ties to the lower index), InTopKV2 (whether each target's
// prediction is among its row's k largest), LRN (x / (bias + alpha *
// sum of squares over depth_radius neighbouring channels)^beta) and LRNGrad.
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

absl::Status TopKShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape in, c->WithRankAtLeast(c->input(0), 1, "TopKV2 input"));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, "TopKV2 k").status());
  if (in.unknown_rank()) {
    for (int i = 0; i < 2; ++i) c->set_output(i, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
  std::vector<int64_t> k;
  int64_t& last = dims.back();
  if (c->ConstantInputAsInts(1, &k)) {
    if (k[0] < 0) return absl::InvalidArgumentError(absl::StrCat("TopKV2: k must be non-negative, got ", k[0]));
    if (last >= 0 && k[0] > last) {
      return absl::InvalidArgumentError(
          absl::StrCat("TopKV2: input ", in.DebugString(), " must have last dimension >= k = ", k[0]));
    }
    last = k[0];
  } else {
    last = kUnknown;
  }
  for (int i = 0; i < 2; ++i) c->set_output(i, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status InTopKShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape p, c->WithRank(c->input(0), 2, "InTopKV2 predictions"));
  ASSIGN_OR_RETURN(PartialShape t, c->WithRank(c->input(1), 1, "InTopKV2 targets"));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 0, "InTopKV2 k").status());
  const int64_t a = p.dim(0), b = t.dim(0);
  if (a >= 0 && b >= 0 && a != b) {
    return absl::InvalidArgumentError(absl::StrCat("InTopKV2: predictions ", p.DebugString(), " and targets ",
                                                   t.DebugString(), " must have the same batch size"));
  }
  c->set_output(0, PartialShape({a >= 0 ? a : b}));
  return absl::OkStatus();
}

absl::Status LrnShape(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    RETURN_IF_ERROR(c->WithRank(c->input(i), 4, "LRN input").status());
  }
  return MergeAllInputsShape(c);
}

}  // namespace

void RegisterTopKLrnOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("TopKV2")
                      .Input("input: T")
                      .Input("k: int32")
                      .Output("values: T")
                      .Output("indices: int32")
                      .Attr("sorted: bool = true")
                      .Attr("T: {float, double, int32, int64}")
                      .SetShapeFn(TopKShape));
  r->MustRegister(OpDefBuilder("InTopKV2")
                      .Input("predictions: float")
                      .Input("targets: T")
                      .Input("k: T")
                      .Output("precision: bool")
                      .Attr("T: {int32, int64} = int32")
                      .SetShapeFn(InTopKShape));
  const char* lrn_attrs[] = {"depth_radius: int = 5", "bias: float = 1.0", "alpha: float = 1.0", "beta: float = 0.5",
                             "T: {float, double} = float"};
  OpDefBuilder lrn("LRN");
  lrn.Input("input: T").Output("output: T");
  OpDefBuilder grad("LRNGrad");
  grad.Input("input_grads: T").Input("input_image: T").Input("output_image: T").Output("output: T");
  for (const char* a : lrn_attrs) {
    lrn.Attr(a);
    grad.Attr(a);
  }
  r->MustRegister(lrn.SetShapeFn(LrnShape));
  r->MustRegister(grad.SetShapeFn(LrnShape));
}

}  // namespace distflow

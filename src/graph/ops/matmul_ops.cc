// MatMul: a [M,K] x [K,N] matrix product, either side optionally transposed.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status MatMulShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape a, c->WithRank(c->input(0), 2, "In[0]"));
  ASSIGN_OR_RETURN(PartialShape b, c->WithRank(c->input(1), 2, "In[1]"));
  absl::StatusOr<bool> ta = GetAttrBool(c->node(), "transpose_a");
  absl::StatusOr<bool> tb = GetAttrBool(c->node(), "transpose_b");
  const bool transpose_a = ta.ok() && *ta;
  const bool transpose_b = tb.ok() && *tb;
  const int64_t m = a.dim(transpose_a ? 1 : 0);
  const int64_t ka = a.dim(transpose_a ? 0 : 1);
  const int64_t kb = b.dim(transpose_b ? 1 : 0);
  const int64_t n = b.dim(transpose_b ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return absl::InvalidArgumentError(absl::StrCat("Matrix size-incompatible: In[0]: ", a.DebugString(),
                                                   ", In[1]: ", b.DebugString(), transpose_a ? " (transpose_a)" : "",
                                                   transpose_b ? " (transpose_b)" : ""));
  }
  c->set_output(0, PartialShape({m, n}));
  return absl::OkStatus();
}

}  // namespace

void RegisterMatMulOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("MatMul")
                      .Input("a: T")
                      .Input("b: T")
                      .Output("product: T")
                      .Attr("transpose_a: bool = false")
                      .Attr("transpose_b: bool = false")
                      .Attr("T: {float, double, int32, int64}")
                      .SetShapeFn(MatMulShape));
}

}  // namespace distflow

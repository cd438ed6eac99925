// Random ops with TensorFlow's semantics: RandomUniform, RandomStandardNormal,
// TruncatedNormal. Each takes the output shape as an int32/int64 vector and
// is stateful: successive runs draw new values; non-zero seed/seed2 make the
// sequence reproducible.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status RandomShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(0), 1, "shape"));
  std::vector<int64_t> dims;
  if (c->ConstantInputAsInts(0, &dims)) {
    for (int64_t d : dims) {
      if (d < 0) {
        return absl::InvalidArgumentError(absl::StrCat("shape must have non-negative dimensions, got ",
                                                       PartialShape(absl::MakeConstSpan(dims)).DebugString()));
      }
    }
    c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  } else if (s.dim(0) >= 0) {
    c->set_output(0, PartialShape::UnknownOfRank(static_cast<int>(s.dim(0))));
  } else {
    c->set_output(0, PartialShape::Unknown());
  }
  return absl::OkStatus();
}

void RegisterRandom(OpRegistry* r, const char* name) {
  r->MustRegister(OpDefBuilder(name)
                      .Input("shape: T")
                      .Output("output: dtype")
                      .Attr("seed: int = 0")
                      .Attr("seed2: int = 0")
                      .Attr("dtype: {float, double}")
                      .Attr("T: {int32, int64}")
                      .SetIsStateful()
                      .SetShapeFn(RandomShape));
}

}  // namespace

void RegisterRandomOps(OpRegistry* r) {
  RegisterRandom(r, "RandomUniform");
  RegisterRandom(r, "RandomStandardNormal");
  RegisterRandom(r, "TruncatedNormal");
}

}  // namespace distflow

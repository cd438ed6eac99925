// Sparse optimizer updates: the rows `indices` of a variable (and of its
// slots) updated in place from gradient rows `grad` ([n] + var.shape[1:]),
// the way TensorFlow 1.x applies IndexedSlices gradients on the parameter
// server. SparseApplyAdagrad and SparseApplyMomentum have TF's names and
// inputs; SparseApplyFtrl too. SparseApplyAdam is distflow's: with lazy=true
// it is TF's LazyAdamOptimizer (only the touched rows' m, v and var move),
// with lazy=false TF's AdamOptimizer on IndexedSlices (every row's m and v
// decay and every row moves, exactly the dense step with zero gradient rows).
// Duplicate indices are summed before the update (as TF's optimizers do).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

// Output 0 = var's shape merged with the slots'; grad must be
// [n] + var.shape[1:] with n = len(indices); the rest are scalars.
ShapeFn SparseApplyShape(int num_refs, int grad_index, int indices_index) {
  return [=](InferenceContext* c) -> absl::Status {
    PartialShape var = c->input(0);
    for (int i = 1; i < num_refs; ++i) {
      absl::StatusOr<PartialShape> m = var.Merge(c->input(i));
      if (!m.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(c->node().op(), ": var and slot ", i, " do not have the same ",
                                                       "shape: ", var.DebugString(), " vs ",
                                                       c->input(i).DebugString()));
      }
      var = *m;
    }
    const PartialShape& grad = c->input(grad_index);
    const PartialShape& indices = c->input(indices_index);
    if (!indices.unknown_rank() && indices.rank() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(c->node().op(), ": indices must be a vector, got shape ", indices.DebugString()));
    }
    if (!var.unknown_rank() && !grad.unknown_rank()) {
      std::vector<int64_t> want(var.dims().begin(), var.dims().end());
      if (want.empty()) return absl::InvalidArgumentError(absl::StrCat(c->node().op(), ": var must have rows"));
      want[0] = indices.unknown_rank() ? PartialShape::kUnknownDim : indices.dim(0);
      if (!grad.IsCompatibleWith(PartialShape(absl::MakeConstSpan(want)))) {
        return absl::InvalidArgumentError(absl::StrCat(c->node().op(), ": grad of shape ", grad.DebugString(),
                                                       " is not [len(indices)] + var.shape[1:] for var ",
                                                       var.DebugString(), " and indices ", indices.DebugString()));
      }
    }
    c->set_output(0, var);
    return absl::OkStatus();
  };
}

// Registers `op` with Ref inputs `refs`, then `rest` in order, where "grad"
// is of type T, "indices" of Tindices and the others are T scalars.
void RegisterSparseApply(OpRegistry* r, const std::string& op, const std::vector<std::string>& refs,
                         const std::vector<std::string>& rest, const std::vector<std::string>& extra_attrs) {
  OpDefBuilder b(op);
  for (const std::string& n : refs) b.Input(absl::StrCat(n, ": Ref(T)"));
  int grad_index = -1, indices_index = -1;
  for (size_t i = 0; i < rest.size(); ++i) {
    const int idx = static_cast<int>(refs.size() + i);
    if (rest[i] == "indices") {
      b.Input("indices: Tindices");
      indices_index = idx;
    } else {
      b.Input(absl::StrCat(rest[i], ": T"));
      if (rest[i] == "grad") grad_index = idx;
    }
  }
  b.Output("out: Ref(T)").Attr("T: {float, double}").Attr("Tindices: {int32, int64}");
  b.Attr("use_locking: bool = false");
  for (const std::string& a : extra_attrs) b.Attr(a);
  b.SetShapeFn(SparseApplyShape(static_cast<int>(refs.size()), grad_index, indices_index));
  r->MustRegister(b);
}

}  // namespace

void RegisterSparseTrainingOps(OpRegistry* r) {
  // accum[i] += g^2; var[i] -= lr * g / sqrt(accum[i])
  RegisterSparseApply(r, "SparseApplyAdagrad", {"var", "accum"}, {"lr", "grad", "indices"},
                      {"update_slots: bool = true"});
  // accum[i] = accum[i] * momentum + g; var[i] -= lr * accum[i] (nesterov: lr * g + lr * momentum * accum[i])
  RegisterSparseApply(r, "SparseApplyMomentum", {"var", "accum"}, {"lr", "grad", "indices", "momentum"},
                      {"use_nesterov: bool = false"});
  // TF's FTRL-Proximal (lr_power <= 0) on the touched rows.
  RegisterSparseApply(r, "SparseApplyFtrl", {"var", "accum", "linear"},
                      {"grad", "indices", "lr", "l1", "l2", "lr_power"}, {});
  // ApplyFtrlV2's update (l2_shrinkage) on the touched rows.
  RegisterSparseApply(r, "SparseApplyFtrlV2", {"var", "accum", "linear"},
                      {"grad", "indices", "lr", "l1", "l2", "l2_shrinkage", "lr_power"}, {});
  // Adam on rows; see the header comment for `lazy`.
  RegisterSparseApply(r, "SparseApplyAdam", {"var", "m", "v"},
                      {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad", "indices"},
                      {"lazy: bool = false"});
}

}  // namespace distflow

// Fused in-place optimizer updates, with TensorFlow 1.x names and semantics:
// ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp, ApplyAdam,
// ApplyFtrl, ApplyFtrlV2; and FusedApplyAdam, Adam over N variables in one op.
// Each takes the variable (and its slots) as Ref(T) inputs, updates them in
// place and outputs the variable reference. Hyper-parameters are scalars.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

struct ApplySpec {
  std::vector<std::string> names;  // input names, in order
  std::vector<int> same_as_var;    // inputs that must have var's shape (slots, grad)
  std::vector<int> scalars;        // inputs that must be scalars
};

// Output 0 = var's shape merged with every slot and the gradient; the
// hyper-parameters must be scalars.
ShapeFn ApplyShape(ApplySpec spec) {
  return [spec](InferenceContext* c) -> absl::Status {
    PartialShape s = c->input(0);
    for (int i : spec.same_as_var) {
      absl::StatusOr<PartialShape> m = s.Merge(c->input(i));
      if (!m.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("var and ", spec.names[static_cast<size_t>(i)],
                                                       " do not have the same shape: ", c->input(0).DebugString(),
                                                       " vs ", c->input(i).DebugString()));
      }
      s = *m;
    }
    for (int i : spec.scalars) {
      absl::StatusOr<PartialShape> r = c->WithRank(c->input(i), 0, spec.names[static_cast<size_t>(i)]);
      if (!r.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec.names[static_cast<size_t>(i)], " is not a scalar: ", c->input(i).DebugString()));
      }
    }
    c->set_output(0, s);
    return absl::OkStatus();
  };
}

// Registers `op` with ref inputs `refs`, then `rest` (scalars or the
// gradient, all of type T), the output "out: Ref(T)" and the common attrs.
void RegisterApply(OpRegistry* r, const std::string& op, const std::vector<std::string>& refs,
                   const std::vector<std::string>& rest, const std::vector<std::string>& extra_attrs) {
  OpDefBuilder b(op);
  ApplySpec spec;
  for (const std::string& n : refs) {
    b.Input(absl::StrCat(n, ": Ref(T)"));
    if (!spec.names.empty()) spec.same_as_var.push_back(static_cast<int>(spec.names.size()));
    spec.names.push_back(n);
  }
  for (const std::string& n : rest) {
    b.Input(absl::StrCat(n, ": T"));
    int idx = static_cast<int>(spec.names.size());
    if (n == "grad" || n == "delta") {
      spec.same_as_var.push_back(idx);
    } else {
      spec.scalars.push_back(idx);
    }
    spec.names.push_back(n);
  }
  b.Output("out: Ref(T)").Attr("T: {float, double}").Attr("use_locking: bool = false");
  for (const std::string& a : extra_attrs) b.Attr(a);
  b.SetShapeFn(ApplyShape(std::move(spec)));
  r->MustRegister(b);
}

// FusedApplyAdam: var[i], m[i], v[i] and grad[i] of one shape for each i;
// the six hyper-parameters scalars. No outputs.
absl::Status FusedAdamShape(InferenceContext* c) {
  const int n = (c->num_inputs() - 6) / 4;
  static const char* const kScalars[] = {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"};
  for (int k = 0; k < 6; ++k) {
    if (!c->WithRank(c->input(3 * n + k), 0, kScalars[k]).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kScalars[k], " is not a scalar: ", c->input(3 * n + k).DebugString()));
    }
  }
  for (int i = 0; i < n; ++i) {
    const int others[] = {n + i, 2 * n + i, 3 * n + 6 + i};
    const char* const names[] = {"m", "v", "grad"};
    for (int k = 0; k < 3; ++k) {
      if (!c->input(i).Merge(c->input(others[k])).ok()) {
        return absl::InvalidArgumentError(absl::StrCat("var[", i, "] and ", names[k], "[", i,
                                                       "] do not have the same shape: ", c->input(i).DebugString(),
                                                       " vs ", c->input(others[k]).DebugString()));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTrainingOps(OpRegistry* r) {
  // var -= alpha * delta
  RegisterApply(r, "ApplyGradientDescent", {"var"}, {"alpha", "delta"}, {});
  // accum = accum * momentum + grad; var -= lr * accum
  // (nesterov: var -= lr * grad + lr * momentum * accum)
  RegisterApply(r, "ApplyMomentum", {"var", "accum"}, {"lr", "grad", "momentum"}, {"use_nesterov: bool = false"});
  // accum += grad^2; var -= lr * grad / sqrt(accum)
  RegisterApply(r, "ApplyAdagrad", {"var", "accum"}, {"lr", "grad"}, {"update_slots: bool = true"});
  // ms = rho * ms + (1 - rho) * grad^2; mom = momentum * mom + lr * grad / sqrt(ms + epsilon); var -= mom
  RegisterApply(r, "ApplyRMSProp", {"var", "ms", "mom"}, {"lr", "rho", "momentum", "epsilon", "grad"}, {});
  // lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m += (g - m) * (1 - beta1);
  // v += (g^2 - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + epsilon)
  RegisterApply(r, "ApplyAdam", {"var", "m", "v"},
                {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
                {"use_nesterov: bool = false"});
  // ApplyAdam over N variables of one device in one op (not a TensorFlow op):
  // var[i], m[i], v[i] and grad[i] as ApplyAdam's, the hyper-parameters once.
  // The optimizer builds it for the dense updates of each device (one op
  // to schedule, and one set of hyper-parameter inputs, instead of N); the
  // result is ApplyAdam's on each variable, element for element.
  r->MustRegister(OpDefBuilder("FusedApplyAdam")
                      .Input("var: Ref(N * T)")
                      .Input("m: Ref(N * T)")
                      .Input("v: Ref(N * T)")
                      .Input("beta1_power: T")
                      .Input("beta2_power: T")
                      .Input("lr: T")
                      .Input("beta1: T")
                      .Input("beta2: T")
                      .Input("epsilon: T")
                      .Input("grad: N * T")
                      .Attr("N: int >= 1")
                      .Attr("T: {float, double}")
                      .Attr("use_locking: bool = false")
                      .Attr("use_nesterov: bool = false")
                      .SetShapeFn(FusedAdamShape));
  // FTRL-Proximal (lr_power <= 0): accum_new = accum + g^2;
  // linear += g - (accum_new^-lr_power - accum^-lr_power) / lr * var;
  // var = |linear| > l1 ? (sign(linear) * l1 - linear) / (accum_new^-lr_power / lr + 2 l2) : 0
  RegisterApply(r, "ApplyFtrl", {"var", "accum", "linear"}, {"grad", "lr", "l1", "l2", "lr_power"}, {});
  // TF's ApplyFtrlV2: as ApplyFtrl, but linear takes grad + 2 * l2_shrinkage * var
  // (accum still grad^2): an L2 penalty that shrinks the weights themselves.
  RegisterApply(r, "ApplyFtrlV2", {"var", "accum", "linear"}, {"grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"},
                {});
}

}  // namespace distflow

// Optimizers in the style of TensorFlow 1.x tf.train: each turns
// (gradient, variable) pairs into fused in-place update ops (ApplyAdam, ...).
//
//   Scope root = Scope::NewRootScope();
//   ...                                   // build a loss over variables
//   Output step = CreateGlobalStep(root);
//   AdamOptimizer opt(0.001);
//   absl::StatusOr<Operation> train = opt.Minimize(root, loss, &step);
//   sess.Run({}, {}, {ops::GlobalVariablesInitializer(root)});
//   sess.Run(feeds, {}, {*train});
//
// Slot variables (Adam's m and v, Momentum's accumulator, ...) are created on
// first use: named "<var>/<Optimizer>", "<var>/<Optimizer>_1", not trainable,
// zero-initialised by GlobalVariablesInitializer, and placed on their
// variable's device, as is each variable's update op. Slot names are built
// from the variable's full name, so pass a scope without a name prefix (the
// root scope, maybe with a device) to keep them TensorFlow-like; a prefixed
// scope prefixes them too.
//
// An optimizer may be used for several ApplyGradients calls; slots are made
// once per variable and reused. Not thread-safe (like Scope).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/gradients.h"
#include "distflow/ops.h"
#include "distflow/scope.h"

namespace distflow {

class DISTFLOW_EXPORT Optimizer {
 public:
  using GradsAndVars = std::vector<std::pair<Output, Output>>;

  explicit Optimizer(std::string name) : name_(std::move(name)) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }

  // (gradient, variable) pairs of d loss / d var for each variable of
  // `var_list` (empty: scope.TrainableVariables()). A variable that the loss
  // does not depend on gets an invalid gradient.
  absl::StatusOr<GradsAndVars> ComputeGradients(const Scope& scope, const Output& loss,
                                                const std::vector<Output>& var_list = {});

  // The update ops of the pairs with a valid gradient (one per pair, or one
  // per device for an optimizer that fuses them: Adam), grouped into the returned
  // op; then, after every update, the optimizer's own bookkeeping (Adam's
  // beta powers) and `global_step` += 1 if given. InvalidArgument if no pair
  // has a gradient, a variable is not a variable reference, or dtypes or
  // shapes disagree.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope, const GradsAndVars& grads_and_vars,
                                           const Output* global_step = nullptr);

  // ComputeGradients then ApplyGradients.
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss, const Output* global_step = nullptr,
                                     const std::vector<Output>& var_list = {});

  // The slot variable `slot` ("m", "v", "momentum", "accumulator", "rms") of
  // `var`; invalid if it does not exist (yet).
  Output GetSlot(const Output& var, const std::string& slot) const;
  // Slot names this optimizer creates, in order.
  virtual std::vector<std::string> GetSlotNames() const { return {}; }

  // A learning rate computed by the graph (a decay schedule of the global
  // step) instead of the constant given to the constructor: a float or
  // double scalar, cast to each variable's dtype beside its update.
  void SetLearningRate(const Output& learning_rate) { lr_tensor_ = learning_rate; }

 protected:
  // Creates the slots of `var` (via CreateSlot) on `slot_scope` (the
  // variable's device, no control dependencies). Called once per variable.
  virtual absl::Status CreateSlots(const Scope& slot_scope, const Output& var) { return absl::OkStatus(); }
  // Creates non-slot variables (Adam's beta powers) colocated with the first
  // variable; called on each ApplyGradients before any update.
  virtual absl::Status Prepare(const Scope& scope, const Output& first_var) { return absl::OkStatus(); }
  // The update of one variable, built on `scope` (the variable's device).
  virtual absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) = 0;
  // The dense updates of `pairs`, whose variables all request one device
  // and have one dtype, built on `scope` (that device). The default is one
  // ApplyDense per pair; an optimizer may update them all in one op.
  virtual absl::StatusOr<std::vector<Operation>> ApplyDenseGroup(const Scope& scope, const GradsAndVars& pairs);
  // The update of one variable from an IndexedSlices gradient (`grad` is its
  // dense form, `slices` its parts; see distflow/gradients.h), built on the
  // variable's device so only the touched rows travel there. The default
  // applies the dense form with ApplyDense.
  virtual absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                                const Output& var) {
    return ApplyDense(scope, grad, var);
  }
  // Ops that run after every update (`scope` has control deps on them all);
  // their Operations are added to the final group.
  virtual absl::StatusOr<std::vector<Operation>> Finish(const Scope& scope) { return std::vector<Operation>{}; }

  // A non-trainable variable "<var>/<name>" (or `full_name` when var is
  // invalid) initialised to `value` everywhere, registered as a slot `slot`.
  absl::StatusOr<Output> CreateSlot(const Scope& slot_scope, const Output& var, const std::string& slot,
                                    const std::string& op_name, double value);
  // A scalar constant of `dtype` (float or double).
  static Output Scalar(const Scope& s, double v, DataType dtype);
  // The learning rate for an update of dtype `dtype`: the tensor of
  // SetLearningRate if there is one, else the constant `lr`.
  Output LearningRate(const Scope& s, double lr, DataType dtype) const;

 private:
  std::string SlotKey(const Output& var) const;

  const std::string name_;
  Output lr_tensor_;
  // (graph, variable node) -> slot name -> slot variable.
  std::map<std::pair<const GraphState*, std::string>, std::map<std::string, Output>> slots_;
};

class DISTFLOW_EXPORT GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(double learning_rate, std::string name = "GradientDescent")
      : Optimizer(std::move(name)), lr_(learning_rate) {}

 protected:
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;
  // ScatterSub(var, indices, lr * values), as TF does.
  absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                        const Output& var) override;

 private:
  double lr_;
};

class DISTFLOW_EXPORT MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(double learning_rate, double momentum, bool use_nesterov = false, std::string name = "Momentum")
      : Optimizer(std::move(name)), lr_(learning_rate), momentum_(momentum), nesterov_(use_nesterov) {}
  std::vector<std::string> GetSlotNames() const override { return {"momentum"}; }

 protected:
  absl::Status CreateSlots(const Scope& slot_scope, const Output& var) override;
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;
  // SparseApplyMomentum: as in TF, only the touched rows' accumulators decay.
  absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                        const Output& var) override;

 private:
  double lr_, momentum_;
  bool nesterov_;
};

class DISTFLOW_EXPORT AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(double learning_rate, double initial_accumulator_value = 0.1, std::string name = "Adagrad")
      : Optimizer(std::move(name)), lr_(learning_rate), initial_(initial_accumulator_value) {}
  std::vector<std::string> GetSlotNames() const override { return {"accumulator"}; }

 protected:
  absl::Status CreateSlots(const Scope& slot_scope, const Output& var) override;
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;
  // SparseApplyAdagrad: the touched rows step exactly as the dense update
  // does; the other rows (zero gradient) would not move in a dense step either.
  absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                        const Output& var) override;

 private:
  double lr_, initial_;
};

// Slots: "rms" (initialised to ones, as TF 1.x does) and "momentum".
class DISTFLOW_EXPORT RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(double learning_rate, double decay = 0.9, double momentum = 0.0, double epsilon = 1e-10,
                            std::string name = "RMSProp")
      : Optimizer(std::move(name)), lr_(learning_rate), decay_(decay), momentum_(momentum), epsilon_(epsilon) {}
  std::vector<std::string> GetSlotNames() const override { return {"rms", "momentum"}; }

 protected:
  absl::Status CreateSlots(const Scope& slot_scope, const Output& var) override;
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;

 private:
  double lr_, decay_, momentum_, epsilon_;
};

// Slots "m" and "v"; non-slot variables "beta1_power" and "beta2_power"
// (colocated with the first variable), multiplied by beta1/beta2 after the
// updates of each step.
class DISTFLOW_EXPORT AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(double learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8,
                         std::string name = "Adam")
      : Optimizer(std::move(name)), lr_(learning_rate), beta1_(beta1), beta2_(beta2), epsilon_(epsilon) {}
  std::vector<std::string> GetSlotNames() const override { return {"m", "v"}; }

  // The beta power accumulators (invalid before the first ApplyGradients).
  std::pair<Output, Output> GetBetaAccumulators() const { return {beta1_power_, beta2_power_}; }

  // How IndexedSlices gradients are applied (SparseApplyAdam). false (the
  // default, TF's AdamOptimizer): every row's m and v decay and every row
  // moves, the dense step with zero gradient rows, so the whole table is
  // touched on the ps each step. true (TF's LazyAdamOptimizer): only the
  // looked-up rows' m, v and values change.
  void SetLazySparseUpdates(bool lazy) { lazy_ = lazy; }

  // How dense gradients are applied. true (the default): the variables of
  // one device and dtype are updated by one FusedApplyAdam op (one op for a
  // parameter server's share instead of one per variable); false: one
  // ApplyAdam per variable, as TF builds it. The results are the same,
  // element for element.
  void SetFusedDenseUpdates(bool fused) { fused_ = fused; }

 protected:
  absl::Status CreateSlots(const Scope& slot_scope, const Output& var) override;
  absl::Status Prepare(const Scope& scope, const Output& first_var) override;
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;
  absl::StatusOr<std::vector<Operation>> ApplyDenseGroup(const Scope& scope, const GradsAndVars& pairs) override;
  absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                        const Output& var) override;
  absl::StatusOr<std::vector<Operation>> Finish(const Scope& scope) override;

 private:
  double lr_, beta1_, beta2_, epsilon_;
  bool lazy_ = false;
  bool fused_ = true;
  Output beta1_power_, beta2_power_;
};

// FTRL-Proximal (TF's FtrlOptimizer, the optimizer of wide/CTR models):
// slots "accum" (initialised to initial_accumulator_value) and "linear"
// (zeros), named "<var>/Ftrl" and "<var>/Ftrl_1" as in TF. Dense gradients
// use ApplyFtrl; IndexedSlices gradients SparseApplyFtrl on the touched rows
// only (the others would not move in a dense step either: their gradient
// is zero, so their linear and accum stay and var stays what they give).
// learning_rate_power must be <= 0, initial_accumulator_value > 0 and the
// regularisation strengths >= 0 (Create checks; the constructor does not).
// A positive l2_shrinkage_regularization_strength uses TF's ApplyFtrlV2 /
// SparseApplyFtrlV2: linear takes grad + 2 * l2_shrinkage * var, an L2
// penalty on the weights themselves (the accumulator still takes grad^2).
class DISTFLOW_EXPORT FtrlOptimizer : public Optimizer {
 public:
  explicit FtrlOptimizer(double learning_rate, double learning_rate_power = -0.5,
                         double initial_accumulator_value = 0.1, double l1_regularization_strength = 0.0,
                         double l2_regularization_strength = 0.0, std::string name = "Ftrl",
                         double l2_shrinkage_regularization_strength = 0.0)
      : Optimizer(std::move(name)),
        lr_(learning_rate),
        lr_power_(learning_rate_power),
        initial_(initial_accumulator_value),
        l1_(l1_regularization_strength),
        l2_(l2_regularization_strength),
        l2_shrinkage_(l2_shrinkage_regularization_strength) {}
  // InvalidArgument naming the hyperparameter that is out of range.
  static absl::StatusOr<std::unique_ptr<FtrlOptimizer>> Create(double learning_rate, double learning_rate_power = -0.5,
                                                               double initial_accumulator_value = 0.1,
                                                               double l1_regularization_strength = 0.0,
                                                               double l2_regularization_strength = 0.0,
                                                               double l2_shrinkage_regularization_strength = 0.0);
  std::vector<std::string> GetSlotNames() const override { return {"accum", "linear"}; }

 protected:
  absl::Status CreateSlots(const Scope& slot_scope, const Output& var) override;
  absl::StatusOr<Operation> ApplyDense(const Scope& scope, const Output& grad, const Output& var) override;
  absl::StatusOr<Operation> ApplySparse(const Scope& scope, const Output& grad, const IndexedSlices& slices,
                                        const Output& var) override;

 private:
  double lr_, lr_power_, initial_, l1_, l2_, l2_shrinkage_;
};

// An int64 scalar, non-trainable variable "global_step" initialised to 0
// (by GlobalVariablesInitializer).
DISTFLOW_EXPORT Output CreateGlobalStep(const Scope& scope);

namespace train_internal {
// A variable "<name>" in `scope` initialised by `initial` (built by `make_initial`
// on the variable's device, without control dependencies), registered with
// the scope's initializers and, if `trainable`, its trainable variables.
// Initializer ops are named "<name>/Initializer/...", the Assign "<name>/Assign".
DISTFLOW_EXPORT Output NewVariable(const Scope& scope, const std::string& name, const PartialShape& shape,
                                   DataType dtype, const std::function<Output(const Scope&)>& make_initial,
                                   bool trainable);
}  // namespace train_internal

}  // namespace distflow

// Kernels for the fused optimizer updates (graph/ops/training_ops.cc):
// ApplyGradientDescent, ApplyMomentum, ApplyAdagrad, ApplyRMSProp, ApplyAdam,
// ApplyFtrl; and FusedApplyAdam (ApplyAdam over N variables in one kernel).
//
// Each kernel locks every variable it updates (in address order, so two
// updates sharing variables never deadlock), takes their values for in-place
// update (copy-on-write if a step still reads a snapshot), checks shapes and
// then runs a vectorised elementwise update, split over the intra-op pool for
// large tensors. The output is the variable reference.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/isa_dispatch.h"
#include "kernels/cpu/var_locks.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

template <typename T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Unaligned>;
template <typename T>
using ConstArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>, Eigen::Unaligned>;

// What an update sees for one block [begin, end) of the elements.
template <typename T>
struct Block {
  std::vector<T*> refs;  // var, then slots
  const T* grad;
  const std::vector<T>* scalars;
  int64_t begin, n;
  Arr<T> ref(int i) const { return Arr<T>(refs[static_cast<size_t>(i)] + begin, n); }
  ConstArr<T> g() const { return ConstArr<T>(grad + begin, n); }
  T s(int i) const { return (*scalars)[static_cast<size_t>(i)]; }
};

// Shared by every Apply kernel. Derived classes give the ref inputs' names,
// the scalar inputs' names (which come right after the refs, in order, with
// the gradient at `grad_index`) and the per-block update.
template <typename T>
class ApplyOpBase : public OpKernel {
 public:
  ApplyOpBase(OpKernelConstruction* c, std::vector<std::string> refs, std::vector<std::string> scalars, int grad_index,
              int64_t cost_per_element)
      : OpKernel(c),
        ref_names_(std::move(refs)),
        scalar_names_(std::move(scalars)),
        grad_index_(grad_index),
        cost_(cost_per_element) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const int num_refs = static_cast<int>(ref_names_.size());
    std::vector<Var*> vars;
    for (int i = 0; i < num_refs; ++i) {
      Var* v = ctx->input_ref(i);
      if (v == nullptr)
        return absl::InternalError(absl::StrCat("input ", i, " (", ref_names_[i], ") is not a variable"));
      vars.push_back(v);
    }
    // Scalars and the gradient first (no locks needed).
    std::vector<T> scalars;
    int k = 0;
    for (int i = num_refs; i < ctx->num_inputs(); ++i) {
      if (i == grad_index_) continue;
      const Tensor& t = ctx->input(i);
      if (t.NumElements() != 1 || t.dims() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(scalar_names_[static_cast<size_t>(k)], " is not a scalar: ", t.shape().DebugString()));
      }
      scalars.push_back(t.flat<T>()[0]);
      ++k;
    }
    const Tensor& grad = ctx->input(grad_index_);

    std::vector<T*> ptrs;
    int64_t n = 0;
    {
      VarLocks locks(vars);
      std::vector<Tensor*> values;
      for (int i = 0; i < num_refs; ++i) {
        ASSIGN_OR_RETURN(Tensor * val, vars[static_cast<size_t>(i)]->MutableValue());
        values.push_back(val);
      }
      const Tensor& var = *values[0];
      for (int i = 1; i < num_refs; ++i) {
        if (values[static_cast<size_t>(i)]->shape() != var.shape()) {
          return absl::InvalidArgumentError(
              absl::StrCat("var and ", ref_names_[static_cast<size_t>(i)], " do not have the same shape: var '",
                           vars[0]->name(), "' has shape ", var.shape().DebugString(), ", ",
                           ref_names_[static_cast<size_t>(i)], " '", vars[static_cast<size_t>(i)]->name(),
                           "' has shape ", values[static_cast<size_t>(i)]->shape().DebugString()));
        }
      }
      if (grad.shape() != var.shape()) {
        return absl::InvalidArgumentError(absl::StrCat("var and grad do not have the same shape: var '",
                                                       vars[0]->name(), "' has shape ", var.shape().DebugString(),
                                                       ", grad has shape ", grad.shape().DebugString()));
      }
      for (Tensor* t : values) ptrs.push_back(t->flat<T>().data());
      n = var.NumElements();
      const T* g = grad.flat<T>().data();
      ctx->ParallelFor(n, cost_, [&](int64_t begin, int64_t end) {
        Block<T> b{ptrs, g, &scalars, begin, end - begin};
        Update(b);
      });
    }
    ctx->set_output_ref(0, ctx->input_ref_ptr(0));
    return absl::OkStatus();
  }

 protected:
  virtual void Update(const Block<T>& b) const = 0;

 private:
  const std::vector<std::string> ref_names_;
  const std::vector<std::string> scalar_names_;
  const int grad_index_;
  const int64_t cost_;
};

// var -= alpha * delta
template <typename T>
class ApplyGradientDescentOp : public ApplyOpBase<T> {
 public:
  explicit ApplyGradientDescentOp(OpKernelConstruction* c) : ApplyOpBase<T>(c, {"var"}, {"alpha"}, 2, 2) {}

 protected:
  void Update(const Block<T>& b) const override { b.ref(0) -= b.s(0) * b.g(); }
};

// accum = accum * momentum + grad
// var -= lr * accum                       (plain)
// var -= lr * grad + lr * momentum * accum (nesterov)
template <typename T>
class ApplyMomentumOp : public ApplyOpBase<T> {
 public:
  explicit ApplyMomentumOp(OpKernelConstruction* c) : ApplyOpBase<T>(c, {"var", "accum"}, {"lr", "momentum"}, 3, 5) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> n = GetAttrBool(c->def(), "use_nesterov");
    nesterov_ = n.ok() && *n;
    return absl::OkStatus();
  }

 protected:
  void Update(const Block<T>& b) const override {
    const T lr = b.s(0), momentum = b.s(1);
    auto var = b.ref(0);
    auto accum = b.ref(1);
    accum = accum * momentum + b.g();
    if (nesterov_) {
      var -= b.g() * lr + accum * (momentum * lr);
    } else {
      var -= lr * accum;
    }
  }

 private:
  bool nesterov_ = false;
};

// accum += grad^2 (if update_slots); var -= lr * grad / sqrt(accum)
template <typename T>
class ApplyAdagradOp : public ApplyOpBase<T> {
 public:
  explicit ApplyAdagradOp(OpKernelConstruction* c) : ApplyOpBase<T>(c, {"var", "accum"}, {"lr"}, 3, 20) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> u = GetAttrBool(c->def(), "update_slots");
    update_slots_ = !u.ok() || *u;
    return absl::OkStatus();
  }

 protected:
  void Update(const Block<T>& b) const override {
    auto var = b.ref(0);
    auto accum = b.ref(1);
    if (update_slots_) accum += b.g().square();
    var -= b.s(0) * b.g() * accum.rsqrt();
  }

 private:
  bool update_slots_ = true;
};

// ms = ms + (grad^2 - ms) * (1 - rho)
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon)
// var -= mom
template <typename T>
class ApplyRMSPropOp : public ApplyOpBase<T> {
 public:
  explicit ApplyRMSPropOp(OpKernelConstruction* c)
      : ApplyOpBase<T>(c, {"var", "ms", "mom"}, {"lr", "rho", "momentum", "epsilon"}, 7, 25) {}

 protected:
  void Update(const Block<T>& b) const override {
    const T lr = b.s(0), rho = b.s(1), momentum = b.s(2), epsilon = b.s(3);
    auto var = b.ref(0);
    auto ms = b.ref(1);
    auto mom = b.ref(2);
    ms += (b.g().square() - ms) * (T(1) - rho);
    mom = mom * momentum + (ms + epsilon).rsqrt() * b.g() * lr;
    var -= mom;
  }
};

// lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
// m += (g - m) * (1 - beta1); v += (g^2 - v) * (1 - beta2)
// var -= lr_t * m / (sqrt(v) + epsilon)
// (nesterov: var -= lr_t * (m * beta1 + (1 - beta1) * g) / (sqrt(v) + epsilon))
// One pass over the four arrays (three Eigen expressions would read them
// three times); a plain loop, so it vectorises at -O3 for each instruction
// set DispatchIsa compiles it for.
template <typename T, bool kNesterov>
DISTFLOW_ISA_INLINE void AdamLoop(T* __restrict var, T* __restrict m, T* __restrict v, const T* __restrict g, int64_t n,
                                  T alpha, T beta1, T one_minus_beta1, T one_minus_beta2, T epsilon) {
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = m[i] + (gi - m[i]) * one_minus_beta1;
    const T vi = v[i] + (gi * gi - v[i]) * one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kNesterov) {
      var[i] -= ((gi * one_minus_beta1 + beta1 * mi) * alpha) / (std::sqrt(vi) + epsilon);
    } else {
      var[i] -= (mi * alpha) / (std::sqrt(vi) + epsilon);
    }
  }
}

// Adam's hyper-parameters as the loop takes them.
template <typename T>
struct AdamScalars {
  T alpha, beta1, one_minus_beta1, one_minus_beta2, epsilon;
  // beta1_power, beta2_power, lr, beta1, beta2, epsilon, in the ops' order.
  static AdamScalars Of(const T* s) {
    const T beta1_power = s[0], beta2_power = s[1], lr = s[2], beta1 = s[3], beta2 = s[4], epsilon = s[5];
    return {lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power), beta1, T(1) - beta1, T(1) - beta2, epsilon};
  }
};

// Elements [begin, begin + n) of one variable; ApplyAdam and FusedApplyAdam
// both update through this, so the two agree element for element.
template <typename T>
void AdamBlock(T* var, T* m, T* v, const T* g, int64_t begin, int64_t n, const AdamScalars<T>& s, bool nesterov) {
  if (nesterov) {
    DispatchIsa<AdamLoop<T, true>>(var + begin, m + begin, v + begin, g + begin, n, s.alpha, s.beta1, s.one_minus_beta1,
                                   s.one_minus_beta2, s.epsilon);
  } else {
    DispatchIsa<AdamLoop<T, false>>(var + begin, m + begin, v + begin, g + begin, n, s.alpha, s.beta1,
                                    s.one_minus_beta1, s.one_minus_beta2, s.epsilon);
  }
}

constexpr int64_t kAdamCostPerElement = 30;

template <typename T>
class ApplyAdamOp : public ApplyOpBase<T> {
 public:
  explicit ApplyAdamOp(OpKernelConstruction* c)
      : ApplyOpBase<T>(c, {"var", "m", "v"}, {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"}, 9,
                       kAdamCostPerElement) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> n = GetAttrBool(c->def(), "use_nesterov");
    nesterov_ = n.ok() && *n;
    return absl::OkStatus();
  }

 protected:
  void Update(const Block<T>& b) const override {
    AdamBlock(b.refs[0], b.refs[1], b.refs[2], b.grad, b.begin, b.n, AdamScalars<T>::Of(b.scalars->data()), nesterov_);
  }

 private:
  bool nesterov_ = false;
};

// FusedApplyAdam: inputs var[N], m[N], v[N] (refs), the six scalars of
// ApplyAdam, grad[N]. Each variable is updated as ApplyAdam would (its three
// variables locked while it is, the same blocks of the intra-op pool), one
// after the other; one kernel for all of them saves the scheduling of N ops
// and their 6N hyper-parameter inputs on the ps.
template <typename T>
class FusedApplyAdamOp : public OpKernel {
 public:
  explicit FusedApplyAdamOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> n = GetAttrBool(c->def(), "use_nesterov");
    nesterov_ = n.ok() && *n;
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = (ctx->num_inputs() - 6) / 4;
    if (n < 1 || ctx->num_inputs() != 4 * n + 6) {
      return absl::InternalError(absl::StrCat("FusedApplyAdam has ", ctx->num_inputs(), " inputs; 4 N + 6 expected"));
    }
    static const char* const kScalars[] = {"beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"};
    T scalars[6];
    for (int k = 0; k < 6; ++k) {
      const Tensor& t = ctx->input(3 * n + k);
      if (t.NumElements() != 1 || t.dims() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(kScalars[k], " is not a scalar: ", t.shape().DebugString()));
      }
      scalars[k] = t.flat<T>()[0];
    }
    const AdamScalars<T> s = AdamScalars<T>::Of(scalars);
    for (int i = 0; i < n; ++i) {
      RETURN_IF_ERROR(UpdateOne(ctx, {ctx->input_ref(i), ctx->input_ref(n + i), ctx->input_ref(2 * n + i)},
                                ctx->input(3 * n + 6 + i), s));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status UpdateOne(OpKernelContext* ctx, const std::vector<Var*>& vars, const Tensor& grad,
                         const AdamScalars<T>& s) const {
    static const char* const kNames[] = {"var", "m", "v"};
    for (size_t k = 0; k < vars.size(); ++k) {
      if (vars[k] == nullptr) return absl::InternalError(absl::StrCat("an input ", kNames[k], " is not a variable"));
    }
    VarLocks locks(vars);
    Tensor* values[3];
    for (size_t k = 0; k < 3; ++k) {
      ASSIGN_OR_RETURN(values[k], vars[k]->MutableValue());
    }
    const TensorShape& shape = values[0]->shape();
    for (size_t k = 1; k < 3; ++k) {
      if (values[k]->shape() != shape) {
        return absl::InvalidArgumentError(absl::StrCat("var and ", kNames[k], " do not have the same shape: var '",
                                                       vars[0]->name(), "' has shape ", shape.DebugString(), ", ",
                                                       kNames[k], " '", vars[k]->name(), "' has shape ",
                                                       values[k]->shape().DebugString()));
      }
    }
    if (grad.shape() != shape) {
      return absl::InvalidArgumentError(absl::StrCat("var and grad do not have the same shape: var '", vars[0]->name(),
                                                     "' has shape ", shape.DebugString(), ", grad has shape ",
                                                     grad.shape().DebugString()));
    }
    T* var = values[0]->flat<T>().data();
    T* m = values[1]->flat<T>().data();
    T* v = values[2]->flat<T>().data();
    const T* g = grad.flat<T>().data();
    ctx->ParallelFor(values[0]->NumElements(), kAdamCostPerElement,
                     [&](int64_t begin, int64_t end) { AdamBlock(var, m, v, g, begin, end - begin, s, nesterov_); });
    return absl::OkStatus();
  }

  bool nesterov_ = false;
};

// FTRL-Proximal (TF's ApplyFtrl; the sparse kernel's arithmetic, every element):
// accum_new = accum + grad^2
// linear += grad - (accum_new^-lr_power - accum^-lr_power) / lr * var
// quadratic = accum_new^-lr_power / lr + 2 * l2
// var = |linear| > l1 ? (sign(linear) * l1 - linear) / quadratic : 0
// V2 (ApplyFtrlV2) adds 2 * l2_shrinkage * var to the grad that linear takes.
template <typename T, bool V2>
class ApplyFtrlOp : public ApplyOpBase<T> {
 public:
  explicit ApplyFtrlOp(OpKernelConstruction* c)
      : ApplyOpBase<T>(c, {"var", "accum", "linear"},
                       V2 ? std::vector<std::string>{"lr", "l1", "l2", "l2_shrinkage", "lr_power"}
                          : std::vector<std::string>{"lr", "l1", "l2", "lr_power"},
                       3, 60) {}

 protected:
  void Update(const Block<T>& b) const override {
    const T lr = b.s(0), l1 = b.s(1), l2 = b.s(2), shrink = V2 ? b.s(3) : T(0), lr_power = b.s(V2 ? 4 : 3);
    T* var = b.refs[0] + b.begin;
    T* accum = b.refs[1] + b.begin;
    T* linear = b.refs[2] + b.begin;
    const T* g = b.grad + b.begin;
    for (int64_t i = 0; i < b.n; ++i) {
      const T new_accum = accum[i] + g[i] * g[i];
      const T p_new = std::pow(new_accum, -lr_power), p_old = std::pow(accum[i], -lr_power);
      linear[i] += g[i] + T(2) * shrink * var[i] - (p_new - p_old) / lr * var[i];
      const T quadratic = p_new / lr + T(2) * l2;
      var[i] = std::abs(linear[i]) > l1 ? ((linear[i] > 0 ? l1 : -l1) - linear[i]) / quadratic : T(0);
      accum[i] = new_accum;
    }
  }
};

template <typename T>
void RegisterFor(KernelRegistry* r) {
  const DataType dt = DataTypeToEnum<T>::value;
  r->Register<ApplyGradientDescentOp<T>>("ApplyGradientDescent", kCpu, dt);
  r->Register<ApplyMomentumOp<T>>("ApplyMomentum", kCpu, dt);
  r->Register<ApplyAdagradOp<T>>("ApplyAdagrad", kCpu, dt);
  r->Register<ApplyRMSPropOp<T>>("ApplyRMSProp", kCpu, dt);
  r->Register<ApplyAdamOp<T>>("ApplyAdam", kCpu, dt);
  r->Register<FusedApplyAdamOp<T>>("FusedApplyAdam", kCpu, dt);
  r->Register<ApplyFtrlOp<T, false>>("ApplyFtrl", kCpu, dt);
  r->Register<ApplyFtrlOp<T, true>>("ApplyFtrlV2", kCpu, dt);
}

}  // namespace

void RegisterTrainingKernels(KernelRegistry* r) {
  RegisterFor<float>(r);
  RegisterFor<double>(r);
}

}  // namespace distflow

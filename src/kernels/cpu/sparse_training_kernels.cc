// Kernels of the sparse optimizer updates (graph/ops/sparse_training_ops.cc):
// SparseApplyAdagrad, SparseApplyMomentum, SparseApplyFtrl, SparseApplyAdam.
//
// Each reads the ids, sums the gradient rows of duplicate ids (first
// appearance order), locks the variable and its slots (address order, as the
// dense kernels do), checks shapes and every id against the variable's rows
// before touching anything, then updates the touched rows only, except the
// exact (lazy=false) Adam, which runs the dense step on every row with zero
// gradient rows where no id points. A bad id fails the step with the op, the
// node, the id and the row count; the variable is left as it was.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/sparse_index.h"
#include "kernels/cpu/var_locks.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

// What an update sees: the variable and slots, the distinct touched rows and
// their summed gradient rows, the row length and the scalar inputs.
template <typename T>
struct Rows {
  std::vector<T*> refs;      // var, then slots: [num_rows, inner] each
  std::vector<int64_t> ids;  // distinct, first-appearance order
  std::vector<T> grads;      // [ids.size(), inner]
  int64_t inner = 0, num_rows = 0;
  std::vector<T> scalars;
  T* row(int ref, int64_t id) const { return refs[static_cast<size_t>(ref)] + id * inner; }
  const T* grad(size_t k) const { return grads.data() + static_cast<int64_t>(k) * inner; }
  T s(int i) const { return scalars[static_cast<size_t>(i)]; }
};

template <typename T>
class SparseApplyBase : public OpKernel {
 public:
  SparseApplyBase(OpKernelConstruction* c, const char* op, int num_refs, int grad_index, int indices_index)
      : OpKernel(c), op_(op), num_refs_(num_refs), grad_index_(grad_index), indices_index_(indices_index) {}

  // The rows of the gradient, not the variables: a step's few hundred rows
  // of a large table run inline on the thread that made them ready (the
  // gradient's RPC thread on a ps) instead of waiting for a pool thread.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (static_cast<size_t>(std::max(grad_index_, indices_index_)) >= in.size()) return OpKernel::EstimatedWork(in);
    return (in[static_cast<size_t>(grad_index_)].num_elements() +
            in[static_cast<size_t>(indices_index_)].num_elements());
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<Var*> vars;
    for (int i = 0; i < num_refs_; ++i) {
      Var* v = ctx->input_ref(i);
      if (v == nullptr)
        return absl::InternalError(absl::StrCat(op_, " (node '", name(), "'): input ", i, " is not a variable"));
      vars.push_back(v);
    }
    Rows<T> r;
    for (int i = num_refs_; i < ctx->num_inputs(); ++i) {
      if (i == grad_index_ || i == indices_index_) continue;
      const Tensor& t = ctx->input(i);
      if (t.dims() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(op_, " (node '", name(), "'): input ", i,
                                                       " must be a scalar, got shape ", t.shape().DebugString()));
      }
      r.scalars.push_back(t.flat<T>()[0]);
    }
    const Tensor& grad = ctx->input(grad_index_);
    const Tensor& indices = ctx->input(indices_index_);
    if (indices.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          op_, " (node '", name(), "'): indices must be a vector, got shape ", indices.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, sparse_index::Read(indices, op_, name(), "indices"));
    {
      VarLocks locks(vars);
      std::vector<Tensor*> values;
      for (Var* v : vars) {
        ASSIGN_OR_RETURN(Tensor * t, v->MutableValue());
        values.push_back(t);
      }
      const Tensor& var = *values[0];
      if (var.dims() < 1) {
        return absl::InvalidArgumentError(absl::StrCat(op_, " (node '", name(), "'): variable '", vars[0]->name(),
                                                       "' is a scalar; sparse updates need rows"));
      }
      for (int i = 1; i < num_refs_; ++i) {
        if (values[static_cast<size_t>(i)]->shape() != var.shape()) {
          return absl::InvalidArgumentError(
              absl::StrCat(op_, " (node '", name(), "'): slot '", vars[static_cast<size_t>(i)]->name(), "' has shape ",
                           values[static_cast<size_t>(i)]->shape().DebugString(), " but variable '", vars[0]->name(),
                           "' has shape ", var.shape().DebugString()));
        }
      }
      bool grad_ok = grad.dims() == var.dims() && grad.dim_size(0) == static_cast<int64_t>(ids.size());
      for (int k = 1; grad_ok && k < var.dims(); ++k) grad_ok = grad.dim_size(k) == var.dim_size(k);
      if (!grad_ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            op_, " (node '", name(), "'): grad of shape ", grad.shape().DebugString(), " is not [", ids.size(),
            "] + the row shape of variable '", vars[0]->name(), "' ", var.shape().DebugString()));
      }
      r.num_rows = var.dim_size(0);
      RETURN_IF_ERROR(sparse_index::CheckRange(ids, r.num_rows, op_, name(), "indices"));
      r.inner = sparse_index::InnerSize(var.shape(), 1);
      Dedupe(ids, grad.flat<T>().data(), &r);
      for (Tensor* t : values) r.refs.push_back(t->flat<T>().data());
      Update(ctx, r);
    }
    ctx->set_output_ref(0, ctx->input_ref_ptr(0));
    return absl::OkStatus();
  }

 protected:
  virtual void Update(OpKernelContext* ctx, const Rows<T>& r) const = 0;

 private:
  static void Dedupe(const std::vector<int64_t>& ids, const T* g, Rows<T>* r) {
    std::unordered_map<int64_t, size_t> slot;
    slot.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      auto [it, inserted] = slot.emplace(ids[i], r->ids.size());
      const T* in = g + static_cast<int64_t>(i) * r->inner;
      if (inserted) {
        r->ids.push_back(ids[i]);
        r->grads.insert(r->grads.end(), in, in + r->inner);
      } else {
        T* acc = r->grads.data() + static_cast<int64_t>(it->second) * r->inner;
        for (int64_t j = 0; j < r->inner; ++j) acc[j] += in[j];
      }
    }
  }

  const char* op_;
  const int num_refs_, grad_index_, indices_index_;
};

// Inputs: var, accum, lr, grad, indices.
template <typename T>
class SparseApplyAdagradOp : public SparseApplyBase<T> {
 public:
  explicit SparseApplyAdagradOp(OpKernelConstruction* c) : SparseApplyBase<T>(c, "SparseApplyAdagrad", 2, 3, 4) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> u = GetAttrBool(c->def(), "update_slots");
    update_slots_ = !u.ok() || *u;
    return absl::OkStatus();
  }

 protected:
  void Update(OpKernelContext*, const Rows<T>& r) const override {
    const T lr = r.s(0);
    for (size_t k = 0; k < r.ids.size(); ++k) {
      T* var = r.row(0, r.ids[k]);
      T* accum = r.row(1, r.ids[k]);
      const T* g = r.grad(k);
      for (int64_t j = 0; j < r.inner; ++j) {
        if (update_slots_) accum[j] += g[j] * g[j];
        var[j] -= lr * g[j] * (T(1) / std::sqrt(accum[j]));
      }
    }
  }

 private:
  bool update_slots_ = true;
};

// Inputs: var, accum, lr, grad, indices, momentum.
template <typename T>
class SparseApplyMomentumOp : public SparseApplyBase<T> {
 public:
  explicit SparseApplyMomentumOp(OpKernelConstruction* c) : SparseApplyBase<T>(c, "SparseApplyMomentum", 2, 3, 4) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> n = GetAttrBool(c->def(), "use_nesterov");
    nesterov_ = n.ok() && *n;
    return absl::OkStatus();
  }

 protected:
  void Update(OpKernelContext*, const Rows<T>& r) const override {
    const T lr = r.s(0), momentum = r.s(1);
    for (size_t k = 0; k < r.ids.size(); ++k) {
      T* var = r.row(0, r.ids[k]);
      T* accum = r.row(1, r.ids[k]);
      const T* g = r.grad(k);
      for (int64_t j = 0; j < r.inner; ++j) {
        accum[j] = accum[j] * momentum + g[j];
        var[j] -= nesterov_ ? g[j] * lr + accum[j] * (momentum * lr) : lr * accum[j];
      }
    }
  }

 private:
  bool nesterov_ = false;
};

// Inputs: var, accum, linear, grad, indices, lr, l1, l2, [l2_shrinkage (V2),] lr_power.
template <typename T, bool V2>
class SparseApplyFtrlOp : public SparseApplyBase<T> {
 public:
  explicit SparseApplyFtrlOp(OpKernelConstruction* c)
      : SparseApplyBase<T>(c, V2 ? "SparseApplyFtrlV2" : "SparseApplyFtrl", 3, 3, 4) {}

 protected:
  void Update(OpKernelContext*, const Rows<T>& r) const override {
    const T lr = r.s(0), l1 = r.s(1), l2 = r.s(2), shrink = V2 ? r.s(3) : T(0), lr_power = r.s(V2 ? 4 : 3);
    for (size_t k = 0; k < r.ids.size(); ++k) {
      T* var = r.row(0, r.ids[k]);
      T* accum = r.row(1, r.ids[k]);
      T* linear = r.row(2, r.ids[k]);
      const T* g = r.grad(k);
      for (int64_t j = 0; j < r.inner; ++j) {
        const T new_accum = accum[j] + g[j] * g[j];
        const T p_new = std::pow(new_accum, -lr_power), p_old = std::pow(accum[j], -lr_power);
        linear[j] += g[j] + T(2) * shrink * var[j] - (p_new - p_old) / lr * var[j];
        const T quadratic = p_new / lr + T(2) * l2;
        var[j] = std::abs(linear[j]) > l1 ? ((linear[j] > 0 ? l1 : -l1) - linear[j]) / quadratic : T(0);
        accum[j] = new_accum;
      }
    }
  }
};

// Inputs: var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices.
template <typename T>
class SparseApplyAdamOp : public SparseApplyBase<T> {
 public:
  explicit SparseApplyAdamOp(OpKernelConstruction* c) : SparseApplyBase<T>(c, "SparseApplyAdam", 3, 9, 10) {}
  absl::Status Init(OpKernelConstruction* c) override {
    absl::StatusOr<bool> l = GetAttrBool(c->def(), "lazy");
    lazy_ = l.ok() && *l;
    return absl::OkStatus();
  }
  // The exact variant decays every row's moments: the whole variable.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    return lazy_ ? SparseApplyBase<T>::EstimatedWork(in) : OpKernel::EstimatedWork(in);
  }

 protected:
  // The dense kernel's arithmetic (training_kernels.cc), element by element.
  static void Step(T* var, T* m, T* v, const T* g, int64_t n, T alpha, T one_minus_beta1, T one_minus_beta2,
                   T epsilon) {
    for (int64_t i = 0; i < n; ++i) {
      const T gi = g == nullptr ? T(0) : g[i];
      const T mi = m[i] + (gi - m[i]) * one_minus_beta1;
      const T vi = v[i] + (gi * gi - v[i]) * one_minus_beta2;
      m[i] = mi;
      v[i] = vi;
      var[i] -= (mi * alpha) / (std::sqrt(vi) + epsilon);
    }
  }

  void Update(OpKernelContext* ctx, const Rows<T>& r) const override {
    const T beta1_power = r.s(0), beta2_power = r.s(1), lr = r.s(2), beta1 = r.s(3), beta2 = r.s(4), epsilon = r.s(5);
    const T alpha = lr * std::sqrt(T(1) - beta2_power) / (T(1) - beta1_power);
    const T omb1 = T(1) - beta1, omb2 = T(1) - beta2;
    if (lazy_) {
      for (size_t k = 0; k < r.ids.size(); ++k) {
        Step(r.row(0, r.ids[k]), r.row(1, r.ids[k]), r.row(2, r.ids[k]), r.grad(k), r.inner, alpha, omb1, omb2,
             epsilon);
      }
      return;
    }
    std::vector<int64_t> where(static_cast<size_t>(r.num_rows), -1);
    for (size_t k = 0; k < r.ids.size(); ++k) where[static_cast<size_t>(r.ids[k])] = static_cast<int64_t>(k);
    ctx->ParallelFor(r.num_rows, 30 * r.inner, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t k = where[static_cast<size_t>(row)];
        Step(r.row(0, row), r.row(1, row), r.row(2, row), k < 0 ? nullptr : r.grad(static_cast<size_t>(k)), r.inner,
             alpha, omb1, omb2, epsilon);
      }
    });
  }

 private:
  bool lazy_ = false;
};

template <typename T>
void RegisterFor(KernelRegistry* r) {
  const DataType dt = DataTypeToEnum<T>::value;
  r->Register<SparseApplyAdagradOp<T>>("SparseApplyAdagrad", kCpu, dt);
  r->Register<SparseApplyMomentumOp<T>>("SparseApplyMomentum", kCpu, dt);
  r->Register<SparseApplyFtrlOp<T, false>>("SparseApplyFtrl", kCpu, dt);
  r->Register<SparseApplyFtrlOp<T, true>>("SparseApplyFtrlV2", kCpu, dt);
  r->Register<SparseApplyAdamOp<T>>("SparseApplyAdam", kCpu, dt);
}

}  // namespace

void RegisterSparseTrainingKernels(KernelRegistry* r) {
  RegisterFor<float>(r);
  RegisterFor<double>(r);
}

}  // namespace distflow

// CPU kernels for the gradient-support ops (see graph/ops/grad_support_ops.cc).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/shape_rules.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/work_from_values.h"

namespace distflow {
namespace {

using kernel_util::DimsString;
using kernel_util::ReadInts;

// Writes `values` as a vector of `dt` (int32 or int64) to output i.
absl::Status WriteInts(OpKernelContext* ctx, int i, DataType dt, const std::vector<int64_t>& values) {
  ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(i, TensorShape({static_cast<int64_t>(values.size())})));
  if (dt == DT_INT32) {
    auto f = out->flat<int32_t>();
    for (size_t k = 0; k < values.size(); ++k) f[k] = static_cast<int32_t>(values[k]);
  } else {
    auto f = out->flat<int64_t>();
    for (size_t k = 0; k < values.size(); ++k) f[k] = values[k];
  }
  return absl::OkStatus();
}

// Row-major strides of `dims`.
std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims[static_cast<size_t>(i) + 1];
  }
  return s;
}

std::vector<int64_t> ShapeDims(const TensorShape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.dims(); ++i) d.push_back(s.dim_size(i));
  return d;
}

// Normalised reduction axes as a mask over `rank` dimensions.
absl::StatusOr<std::vector<bool>> AxesMask(const Tensor& axes, int rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> v, ReadInts(axes, "reduction_indices", /*allow_scalar=*/true));
  return ReductionMask(v, rank);
}

// ---------------------------------------------------------------------------

class BroadcastGradientArgsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> s0, ReadInts(ctx->input(0), "s0"));
    ASSIGN_OR_RETURN(std::vector<int64_t> s1, ReadInts(ctx->input(1), "s1"));
    const size_t n = std::max(s0.size(), s1.size());
    std::vector<int64_t> r0, r1;
    for (size_t i = 0; i < n; ++i) {
      const int64_t d0 = i + s0.size() >= n ? s0[i + s0.size() - n] : 1;
      const int64_t d1 = i + s1.size() >= n ? s1[i + s1.size() - n] : 1;
      const int64_t axis = static_cast<int64_t>(i);
      if (d0 == d1) {
        if (d0 == 1) {
          r0.push_back(axis);
          r1.push_back(axis);
        }
      } else if (d0 == 1) {
        r0.push_back(axis);
      } else if (d1 == 1) {
        r1.push_back(axis);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("Incompatible shapes: ", DimsString(s0), " vs. ", DimsString(s1)));
      }
    }
    RETURN_IF_ERROR(WriteInts(ctx, 0, ctx->input(0).dtype(), r0));
    return WriteInts(ctx, 1, ctx->input(0).dtype(), r1);
  }
};

class ReducedShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(ctx->input(0), "input_shape"));
    ASSIGN_OR_RETURN(std::vector<bool> mask, AxesMask(ctx->input(1), static_cast<int>(shape.size())));
    for (size_t i = 0; i < shape.size(); ++i) {
      if (mask[i]) shape[i] = 1;
    }
    return WriteInts(ctx, 0, ctx->input(0).dtype(), shape);
  }
};

// Copies `src` broadcast to `dims` (`in_strides`: the input's strides, 0
// along the broadcast dimensions) into `dst`, a block at a time: dimensions
// that continue each other (a contiguous run of the input, or broadcasts
// next to each other) are merged, and the innermost one is one copy or one
// fill, not an index update per element.
template <typename T>
void BroadcastInto(const T* src, T* dst, std::vector<int64_t> dims, std::vector<int64_t> in_strides) {
  std::vector<int64_t> d, st;  // merged, outermost first; size-1 dimensions dropped
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!d.empty() && st.back() == in_strides[i] * dims[i]) {
      d.back() *= dims[i];
      st.back() = in_strides[i];
      continue;
    }
    d.push_back(dims[i]);
    st.push_back(in_strides[i]);
  }
  if (d.empty()) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = d.back();
  const bool fill = st.back() == 0;
  d.pop_back();
  st.pop_back();
  std::vector<int64_t> idx(d.size(), 0);
  int64_t off = 0;
  for (T* out = dst;; out += inner) {
    if (fill) {
      std::fill_n(out, inner, src[off]);
    } else {
      std::copy_n(src + off, inner, out);
    }
    int k = static_cast<int>(d.size()) - 1;
    for (; k >= 0; --k) {
      const size_t u = static_cast<size_t>(k);
      off += st[u];
      if (++idx[u] < d[u]) break;
      off -= st[u] * idx[u];
      idx[u] = 0;
    }
    if (k < 0) return;
  }
}

class BroadcastToOp : public OpKernel, public WorkFromValues {
 public:
  using OpKernel::OpKernel;
  // The output's size is an input's value: the shapes do not tell, the values do.
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  int64_t EstimatedWorkFromValues(const std::vector<const Tensor*>& inputs) const override {
    if (inputs.size() != 2 || inputs[1] == nullptr) return -1;
    absl::StatusOr<std::vector<int64_t>> dims = ReadInts(*inputs[1], "shape");
    if (!dims.ok()) return -1;
    int64_t n = 1;
    for (int64_t d : *dims) {
      if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) return -1;
      n *= d;
    }
    return n;
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(ctx->input(1), "shape"));
    const int rank = static_cast<int>(dims.size());
    if (in.dims() > rank) {
      return absl::InvalidArgumentError(absl::StrCat("Cannot broadcast a tensor of shape ", in.shape().DebugString(),
                                                     " to the lower-rank shape ", DimsString(dims)));
    }
    std::vector<int64_t> in_dims(static_cast<size_t>(rank), 1);
    for (int i = 0; i < in.dims(); ++i) in_dims[static_cast<size_t>(rank - in.dims() + i)] = in.dim_size(i);
    for (int i = 0; i < rank; ++i) {
      const size_t k = static_cast<size_t>(i);
      if (in_dims[k] != dims[k] && in_dims[k] != 1) {
        return absl::InvalidArgumentError(absl::StrCat("Cannot broadcast a tensor of shape ", in.shape().DebugString(),
                                                       " to shape ", DimsString(dims)));
      }
    }
    std::vector<int64_t> in_strides = Strides(in_dims);
    for (int i = 0; i < rank; ++i) {
      if (in_dims[static_cast<size_t>(i)] == 1) in_strides[static_cast<size_t>(i)] = 0;
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      BroadcastInto<T>(in.flat<T>().data(), out->flat<T>().data(), dims, std::move(in_strides));
    });
    return absl::OkStatus();
  }
};

class InvertPermutationOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> p, ReadInts(ctx->input(0), "x"));
    const int64_t n = static_cast<int64_t>(p.size());
    std::vector<int64_t> inv(p.size(), -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = p[static_cast<size_t>(i)];
      if (v < 0 || v >= n || inv[static_cast<size_t>(v)] != -1) {
        return absl::InvalidArgumentError(absl::StrCat(DimsString(p), " is not a permutation of 0..", n - 1));
      }
      inv[static_cast<size_t>(v)] = i;
    }
    return WriteInts(ctx, 0, ctx->input(0).dtype(), inv);
  }
};

class ConcatOffsetOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& cd = ctx->input(0);
    if (cd.dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("concat_dim must be a scalar, got shape ", cd.shape().DebugString()));
    }
    const int n = ctx->num_inputs() - 1;
    ASSIGN_OR_RETURN(std::vector<int64_t> first, ReadInts(ctx->input(1), "shape"));
    const int64_t rank = static_cast<int64_t>(first.size());
    int64_t axis = cd.scalar<int32_t>();
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Concat dim ", axis, " out of range [", -rank, ", ", rank, ") for shape ", DimsString(first)));
    }
    if (axis < 0) axis += rank;
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      ASSIGN_OR_RETURN(std::vector<int64_t> s, ReadInts(ctx->input(i + 1), "shape"));
      if (static_cast<int64_t>(s.size()) != rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("input ", i, " has shape ", DimsString(s), " of a different rank than ", DimsString(first)));
      }
      for (int64_t d = 0; d < rank; ++d) {
        if (d != axis && s[static_cast<size_t>(d)] != first[static_cast<size_t>(d)]) {
          return absl::InvalidArgumentError(
              absl::StrCat("input ", i, " has shape ", DimsString(s), " incompatible with ", DimsString(first)));
        }
      }
      std::vector<int64_t> off(static_cast<size_t>(rank), 0);
      off[static_cast<size_t>(axis)] = offset;
      offset += s[static_cast<size_t>(axis)];
      RETURN_IF_ERROR(WriteInts(ctx, i, DT_INT32, off));
    }
    return absl::OkStatus();
  }
};

class SliceGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  // The output's size is an input's value.
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(ctx->input(0), "input_shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> begin, ReadInts(ctx->input(1), "begin"));
    const Tensor& g = ctx->input(2);
    const int rank = static_cast<int>(dims.size());
    if (static_cast<int>(begin.size()) != rank || g.dims() != rank) {
      return absl::InvalidArgumentError(absl::StrCat("SliceGrad: input_shape ", DimsString(dims), ", begin ",
                                                     DimsString(begin), " and grad of shape ", g.shape().DebugString(),
                                                     " must have the same rank"));
    }
    for (int i = 0; i < rank; ++i) {
      const size_t k = static_cast<size_t>(i);
      if (begin[k] < 0 || begin[k] + g.dim_size(i) > dims[k]) {
        return absl::InvalidArgumentError(absl::StrCat("SliceGrad: a grad of shape ", g.shape().DebugString(), " at ",
                                                       DimsString(begin), " does not fit in ", DimsString(dims)));
      }
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    const std::vector<int64_t> strides = Strides(dims);
    const std::vector<int64_t> gdims = ShapeDims(g.shape());
    const int64_t n = g.NumElements();
    VisitDataType(g.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto dst = out->flat<T>();
      std::fill(dst.begin(), dst.end(), T());
      if (n == 0) return;
      auto src = g.flat<T>();
      std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
      int64_t off = 0;
      for (int i = 0; i < rank; ++i) off += begin[static_cast<size_t>(i)] * strides[static_cast<size_t>(i)];
      for (int64_t e = 0; e < n; ++e) {
        dst[static_cast<size_t>(off)] = src[static_cast<size_t>(e)];
        for (int d = rank - 1; d >= 0; --d) {
          const size_t k = static_cast<size_t>(d);
          ++idx[k];
          off += strides[k];
          if (idx[k] < gdims[k]) break;
          off -= strides[k] * idx[k];
          idx[k] = 0;
        }
      }
    });
    return absl::OkStatus();
  }
};

template <typename T>
class ReduceProdGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const int rank = in.dims();
    ASSIGN_OR_RETURN(std::vector<bool> mask, AxesMask(ctx->input(1), rank));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in.shape()));
    const std::vector<int64_t> dims = ShapeDims(in.shape());
    // Group id of each element: its index over the kept dimensions.
    std::vector<int64_t> kept_strides(dims.size(), 0);
    int64_t groups = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const size_t k = static_cast<size_t>(d);
      if (!mask[k]) {
        kept_strides[k] = groups;
        groups *= dims[k];
      }
    }
    const int64_t n = in.NumElements();
    std::vector<std::vector<int64_t>> members(static_cast<size_t>(n == 0 ? 0 : groups));
    std::vector<int64_t> idx(dims.size(), 0);
    int64_t gid = 0;
    for (int64_t e = 0; e < n; ++e) {
      members[static_cast<size_t>(gid)].push_back(e);
      for (int d = rank - 1; d >= 0; --d) {
        const size_t k = static_cast<size_t>(d);
        ++idx[k];
        gid += kept_strides[k];
        if (idx[k] < dims[k]) break;
        gid -= kept_strides[k] * idx[k];
        idx[k] = 0;
      }
    }
    auto x = in.flat<T>();
    auto y = out->flat<T>();
    std::vector<T> suffix;
    for (const std::vector<int64_t>& m : members) {
      // y[m_i] = prod_{j<i} x[m_j] * prod_{j>i} x[m_j]
      suffix.assign(m.size() + 1, T(1));
      for (size_t i = m.size(); i-- > 0;) suffix[i] = suffix[i + 1] * x[static_cast<size_t>(m[i])];
      T prefix = T(1);
      for (size_t i = 0; i < m.size(); ++i) {
        y[static_cast<size_t>(m[i])] = prefix * suffix[i + 1];
        prefix *= x[static_cast<size_t>(m[i])];
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterGradSupportKernels(KernelRegistry* r) {
  r->Register<BroadcastGradientArgsOp>("BroadcastGradientArgs", kCpu, DT_INVALID);
  r->Register<ReducedShapeOp>("ReducedShape", kCpu, DT_INVALID);
  r->Register<BroadcastToOp>("BroadcastTo", kCpu, DT_INVALID);
  r->Register<InvertPermutationOp>("InvertPermutation", kCpu, DT_INVALID);
  r->Register<ConcatOffsetOp>("ConcatOffset", kCpu, DT_INVALID);
  r->Register<SliceGradOp>("SliceGrad", kCpu, DT_INVALID);
  r->Register<ReduceProdGradOp<float>>("ReduceProdGrad", kCpu, DT_FLOAT);
  r->Register<ReduceProdGradOp<double>>("ReduceProdGrad", kCpu, DT_DOUBLE);
  r->Register<ReduceProdGradOp<int32_t>>("ReduceProdGrad", kCpu, DT_INT32);
  r->Register<ReduceProdGradOp<int64_t>>("ReduceProdGrad", kCpu, DT_INT64);
}

}  // namespace distflow

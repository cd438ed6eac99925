// CPU kernels for the array ops (see graph/ops/array_ops.cc); Transpose,
// Tile, Range and OneHot are in array_layout_kernels.cc. The ops that only
// move elements (Reshape, Concat, Slice, Pack, Unpack) work on every dtype,
// strings included: one DT_INVALID kernel each, typed inside through
// VisitDataType. Zero-copy where the layout allows it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
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

using kernel_util::CopyCost;
using kernel_util::DimsString;
using kernel_util::ProductOfValues;
using kernel_util::ReadInts;
using kernel_util::ReadScalarInt;

// ---------------------------------------------------------------------------
// Reshape, Shape, Size, Rank

class ReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> requested, ReadInts(ctx->input(1), "shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                     ResolveReshape(std::move(requested), in.NumElements(), in.shape().DebugString()));
    ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor out, in.Reshaped(shape));
    return ctx->set_output(0, std::move(out));
  }
};

absl::Status WriteInts(OpKernelContext* ctx, DataType dt, absl::Span<const int64_t> values, const TensorShape& shape) {
  ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
  if (dt == DT_INT32) {
    auto f = out->flat<int32_t>();
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(
            absl::StrCat("value ", values[i], " does not fit in int32; use out_type int64"));
      }
      f[i] = static_cast<int32_t>(values[i]);
    }
  } else {
    auto f = out->flat<int64_t>();
    for (size_t i = 0; i < values.size(); ++i) f[i] = values[i];
  }
  return absl::OkStatus();
}

class ShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const TensorShape& s = ctx->input(0).shape();
    return WriteInts(ctx, output_type(0), s.dim_sizes(), TensorShape({s.dims()}));
  }
};

class SizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    int64_t n = ctx->input(0).NumElements();
    return WriteInts(ctx, output_type(0), absl::MakeConstSpan(&n, 1), TensorShape());
  }
};

class RankOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    return ctx->set_output(0, Tensor::Scalar<int32_t>(ctx->input(0).dims()));
  }
};

// ---------------------------------------------------------------------------
// Fill, ZerosLike, OnesLike

class FillOp : public OpKernel, public WorkFromValues {
 public:
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  int64_t EstimatedWorkFromValues(const std::vector<const Tensor*>& inputs) const override {
    return inputs.empty() ? -1 : ProductOfValues(inputs[0], "dims");
  }
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(ctx->input(0), "dims"));
    const Tensor& value = ctx->input(1);
    if (value.dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("value must be a scalar, got shape ", value.shape().DebugString()));
    }
    absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
    if (!shape.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid dims ", DimsString(dims), ": ", shape.status().message()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, *shape));
    VisitDataType(value.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto f = out->flat<T>();
      const T& v = value.scalar<T>();
      ctx->ParallelFor(static_cast<int64_t>(f.size()), CopyCost(value.dtype()),
                       [&](int64_t b, int64_t e) { std::fill(f.begin() + b, f.begin() + e, v); });
    });
    return absl::OkStatus();
  }
};

template <int kValue>
class ConstLikeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, in.shape()));
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<T, std::string>) {
        auto f = out->flat<T>();
        std::fill(f.begin(), f.end(), static_cast<T>(kValue));
      }
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Concat and Pack: every input viewed as [outer, inner_i], the output as
// [outer, sum(inner_i)].

template <typename T>
void ConcatRows(OpKernelContext* ctx, const std::vector<const Tensor*>& ins, const std::vector<int64_t>& inner,
                int64_t outer, Tensor* out) {
  int64_t row = 0;
  for (int64_t v : inner) row += v;
  if (row == 0 || outer == 0) return;
  std::vector<const T*> src;
  for (const Tensor* t : ins) src.push_back(t->flat<T>().data());
  T* dst = out->flat<T>().data();
  ctx->ParallelFor(outer, row * CopyCost(out->dtype()), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      T* d = dst + o * row;
      for (size_t i = 0; i < src.size(); ++i) {
        int64_t n = inner[i];
        std::copy_n(src[i] + o * n, n, d);
        d += n;
      }
    }
  });
}

absl::Status ConcatInto(OpKernelContext* ctx, const std::vector<const Tensor*>& ins, const std::vector<int64_t>& inner,
                        int64_t outer, const TensorShape& out_shape) {
  ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
  VisitDataType(out->dtype(), [&](auto tag) { ConcatRows<typename decltype(tag)::type>(ctx, ins, inner, outer, out); });
  return absl::OkStatus();
}

class ConcatOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    int n = ctx->num_inputs() - 1;
    ASSIGN_OR_RETURN(int64_t axis, ReadScalarInt(ctx->input(n), "axis"));
    const Tensor& first = ctx->input(0);
    int rank = first.dims();
    if (rank == 0) return absl::InvalidArgumentError("Can't concatenate scalars (use tf.stack instead)");
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("ConcatOp : Expected concatenating dimensions in the range [",
                                                     -rank, ", ", rank, "), but got ", axis));
    }
    if (axis < 0) axis += rank;
    int a = static_cast<int>(axis);
    std::vector<const Tensor*> ins;
    std::vector<int64_t> inner;
    int64_t outer = 1, total = 0;
    for (int d = 0; d < a; ++d) outer *= first.dim_size(d);
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(i);
      if (t.dims() != rank) {
        return absl::InvalidArgumentError(
            absl::StrCat("ConcatOp : Ranks of all input tensors should match: shape[0] = ", first.shape().DebugString(),
                         " vs. shape[", i, "] = ", t.shape().DebugString()));
      }
      for (int d = 0; d < rank; ++d) {
        if (d != a && t.dim_size(d) != first.dim_size(d)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ConcatOp : Dimension ", d, " in both shapes must be equal: shape[0] = ", first.shape().DebugString(),
              " vs. shape[", i, "] = ", t.shape().DebugString()));
        }
      }
      total += t.dim_size(a);
      ins.push_back(&t);
      inner.push_back(outer == 0 ? 0 : t.NumElements() / outer);
    }
    if (n == 1) return ctx->set_output(0, first);
    TensorShape out_shape = first.shape();
    RETURN_IF_ERROR(out_shape.SetDim(a, total));
    return ConcatInto(ctx, ins, inner, outer, out_shape);
  }
};

class PackOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(axis_, GetAttrInt(c->def(), "axis"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    int n = ctx->num_inputs();
    const Tensor& first = ctx->input(0);
    int64_t r = first.dims() + 1;
    if (axis_ < -r || axis_ >= r) {
      return absl::InvalidArgumentError(absl::StrCat("axis = ", axis_, " not in [", -r, ", ", r, ")"));
    }
    int a = static_cast<int>(axis_ < 0 ? axis_ + r : axis_);
    std::vector<const Tensor*> ins;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(i);
      if (t.shape() != first.shape()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Shapes of all inputs must match: values[0].shape = ", first.shape().DebugString(),
                         " != values[", i, "].shape = ", t.shape().DebugString()));
      }
      ins.push_back(&t);
    }
    std::vector<int64_t> dims(first.shape().dim_sizes().begin(), first.shape().dim_sizes().end());
    int64_t outer = 1;
    for (int d = 0; d < a; ++d) outer *= dims[static_cast<size_t>(d)];
    dims.insert(dims.begin() + a, n);
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
    int64_t inner = outer == 0 ? 0 : first.NumElements() / outer;
    return ConcatInto(ctx, ins, std::vector<int64_t>(static_cast<size_t>(n), inner), outer, out_shape);
  }

 private:
  int64_t axis_ = 0;
};

class UnpackOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(axis_, GetAttrInt(c->def(), "axis"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    int64_t r = in.dims();
    if (axis_ < -r || axis_ >= r) {
      return absl::InvalidArgumentError(absl::StrCat("axis = ", axis_, " not in [", -r, ", ", r, ")"));
    }
    int a = static_cast<int>(axis_ < 0 ? axis_ + r : axis_);
    int num = num_outputs();
    if (in.dim_size(a) != num) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input shape axis ", a, " must equal ", num, ", got shape ", in.shape().DebugString()));
    }
    TensorShape out_shape = in.shape();
    out_shape.RemoveDim(a);
    int64_t outer = 1;
    for (int d = 0; d < a; ++d) outer *= in.dim_size(d);
    int64_t inner = out_shape.num_elements() / std::max<int64_t>(outer, 1);
    if (outer == 1 || out_shape.num_elements() == 0) {
      // Each output is a contiguous block: share the input's buffer.
      ASSIGN_OR_RETURN(Tensor flat, in.Reshaped(TensorShape({num, out_shape.num_elements()})));
      for (int i = 0; i < num; ++i) {
        ASSIGN_OR_RETURN(Tensor o, flat.Slice(i, i + 1).Reshaped(out_shape));
        RETURN_IF_ERROR(ctx->set_output(i, std::move(o)));
      }
      return absl::OkStatus();
    }
    for (int i = 0; i < num; ++i) {
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(i, out_shape));
      VisitDataType(in.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* src = in.flat<T>().data() + i * inner;
        T* dst = out->flat<T>().data();
        ctx->ParallelFor(outer, inner * CopyCost(in.dtype()), [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) std::copy_n(src + o * num * inner, inner, dst + o * inner);
        });
      });
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = 0;
};

// ---------------------------------------------------------------------------
// Slice

// Copies a box of `in` (viewed with dims in_dims, rank >= 1) starting at
// `begin` with extent `size` into the dense `out`, one innermost row at a time.
template <typename T>
void CopyBox(OpKernelContext* ctx, const T* in, const std::vector<int64_t>& in_dims, const std::vector<int64_t>& begin,
             const std::vector<int64_t>& size, T* out, int64_t cost) {
  int rank = static_cast<int>(in_dims.size());
  std::vector<int64_t> stride(in_dims.size(), 1);
  for (int d = rank - 2; d >= 0; --d) stride[d] = stride[d + 1] * in_dims[d + 1];
  int64_t row = size[rank - 1];
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= size[d];
  if (rows == 0 || row == 0) return;
  ctx->ParallelFor(rows, row * cost, [&](int64_t b, int64_t e) {
    kernel_util::ForEachRow(size, b, e, [&](int64_t r, const int64_t* idx) {
      int64_t off = begin[rank - 1];
      for (int d = 0; d < rank - 1; ++d) off += (begin[d] + idx[d]) * stride[d];
      std::copy_n(in + off, row, out + r * row);
    });
  });
}

class SliceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> begin, ReadInts(ctx->input(1), "begin"));
    ASSIGN_OR_RETURN(std::vector<int64_t> size, ReadInts(ctx->input(2), "size"));
    int rank = in.dims();
    if (static_cast<int>(begin.size()) != rank || static_cast<int>(size.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Expected begin and size arguments to be vectors of length ", rank, " for input of shape ",
          in.shape().DebugString(), ", but got begin ", DimsString(begin), " and size ", DimsString(size)));
    }
    for (int d = 0; d < rank; ++d) {
      int64_t dim = in.dim_size(d);
      if (begin[d] < 0 || begin[d] > dim) {
        return absl::InvalidArgumentError(absl::StrCat("Expected begin[", d, "] in [0, ", dim, "], but got ", begin[d],
                                                       " (input shape ", in.shape().DebugString(), ")"));
      }
      if (size[d] == -1) size[d] = dim - begin[d];
      if (size[d] < 0 || size[d] > dim - begin[d]) {
        return absl::InvalidArgumentError(absl::StrCat("Expected size[", d, "] in [0, ", dim - begin[d], "], but got ",
                                                       size[d], " (input shape ", in.shape().DebugString(), ", begin ",
                                                       DimsString(begin), ")"));
      }
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(size));
    if (out_shape == in.shape()) return ctx->set_output(0, in);
    // Collapse trailing dimensions taken whole into the last partial one.
    int k = rank - 1;
    while (k > 0 && begin[k] == 0 && size[k] == in.dim_size(k)) --k;
    int64_t tail = 1;
    for (int d = k + 1; d < rank; ++d) tail *= in.dim_size(d);
    if (k == 0) {
      // Rows [begin0, begin0 + size0) of dimension 0: zero-copy.
      ASSIGN_OR_RETURN(Tensor s, in.Slice(begin[0], begin[0] + size[0]).Reshaped(out_shape));
      return ctx->set_output(0, std::move(s));
    }
    std::vector<int64_t> dims(in.shape().dim_sizes().begin(), in.shape().dim_sizes().begin() + k + 1);
    begin.resize(static_cast<size_t>(k + 1));
    size.resize(static_cast<size_t>(k + 1));
    dims[k] *= tail;
    begin[k] *= tail;
    size[k] *= tail;
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      CopyBox<T>(ctx, in.flat<T>().data(), dims, begin, size, out->flat<T>().data(), CopyCost(in.dtype()));
    });
    return absl::OkStatus();
  }
};

}  // namespace

// Transpose, Tile, Range, OneHot (array_layout_kernels.cc).
void RegisterArrayLayoutKernels(KernelRegistry* r);

void RegisterArrayKernels(KernelRegistry* r) {
  r->Register<ReshapeOp>("Reshape", kCpu, DT_INVALID);
  r->Register<ShapeOp>("Shape", kCpu, DT_INVALID);
  r->Register<SizeOp>("Size", kCpu, DT_INVALID);
  r->Register<RankOp>("Rank", kCpu, DT_INVALID);
  r->Register<FillOp>("Fill", kCpu, DT_INVALID);
  r->Register<ConstLikeOp<0>>("ZerosLike", kCpu, DT_INVALID);
  r->Register<ConstLikeOp<1>>("OnesLike", kCpu, DT_INVALID);
  r->Register<ConcatOp>("Concat", kCpu, DT_INVALID);
  r->Register<SliceOp>("Slice", kCpu, DT_INVALID);
  r->Register<PackOp>("Pack", kCpu, DT_INVALID);
  r->Register<UnpackOp>("Unpack", kCpu, DT_INVALID);
  RegisterArrayLayoutKernels(r);
}

}  // namespace distflow

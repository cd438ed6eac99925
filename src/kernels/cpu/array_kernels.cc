// CPU kernels for the array ops (see graph/ops/array_ops.cc). The ops that
// only move elements (Reshape, Concat, Slice, Pack, Unpack, Transpose, Tile)
// work on every dtype, strings included: one DT_INVALID kernel each, typed
// inside through VisitDataType. Zero-copy where the layout allows it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/kernel_registry.h"

namespace distflow {
namespace {

using kernel_util::DimsString;
using kernel_util::ReadInts;

absl::StatusOr<int64_t> ReadScalarInt(const Tensor& t, absl::string_view what) {
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  if (t.dtype() == DT_INT32) return t.scalar<int32_t>();
  if (t.dtype() == DT_INT64) return t.scalar<int64_t>();
  return absl::InvalidArgumentError(absl::StrCat(what, " must be int32 or int64, got ", DataTypeName(t.dtype())));
}

template <typename Fn>
void VisitType(DataType dt, Fn&& fn) {
  VisitDataType(dt, std::forward<Fn>(fn));
}

// Rough cycles to copy one element (strings allocate).
int64_t CopyCost(DataType dt) { return dt == DT_STRING ? 50 : 1; }

// ---------------------------------------------------------------------------
// Reshape, Shape, Size, Rank

class ReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, ReadInts(ctx->input(1), "shape"));
    int unknown_index = -1;
    int64_t known = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == -1) {
        if (unknown_index >= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("only one input size may be -1, not both ", unknown_index, " and ", i));
        }
        unknown_index = static_cast<int>(i);
      } else if (dims[i] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("size ", i, " must be non-negative, not ", dims[i]));
      } else if (!MultiplyWithoutOverflow(known, dims[i], &known)) {
        return absl::InvalidArgumentError(absl::StrCat("shape ", DimsString(dims), " has too many elements"));
      }
    }
    int64_t n = in.NumElements();
    if (unknown_index >= 0) {
      if (known == 0) {
        if (n != 0) {
          return absl::InvalidArgumentError(absl::StrCat("Cannot reshape a tensor with ", n, " elements to shape ",
                                                         DimsString(dims)));
        }
        return absl::InvalidArgumentError(absl::StrCat(
            "Reshape cannot infer the missing input size for an empty tensor unless all specified input sizes are "
            "non-zero: ",
            DimsString(dims)));
      }
      if (n % known != 0) {
        return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                       " values, but the requested shape ", DimsString(dims),
                                                       " requires a multiple of ", known));
      }
      dims[static_cast<size_t>(unknown_index)] = n / known;
    } else if (known != n) {
      return absl::InvalidArgumentError(absl::StrCat("Cannot reshape a tensor of shape ", in.shape().DebugString(),
                                                     " with ", n, " elements to shape ", DimsString(dims), " with ",
                                                     known, " elements"));
    }
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

class FillOp : public OpKernel {
 public:
  bool ExpandsInputs() const override { return true; }
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
      return absl::InvalidArgumentError(absl::StrCat("invalid dims ", DimsString(dims), ": ", shape.status().message()));
    }
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, *shape));
    VisitType(value.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto f = out->flat<T>();
      const T& v = value.scalar<T>();
      ctx->ParallelFor(static_cast<int64_t>(f.size()), CopyCost(value.dtype()), [&](int64_t b, int64_t e) {
        std::fill(f.begin() + b, f.begin() + e, v);
      });
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
    VisitType(in.dtype(), [&](auto tag) {
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
  VisitType(out->dtype(), [&](auto tag) { ConcatRows<typename decltype(tag)::type>(ctx, ins, inner, outer, out); });
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
        return absl::InvalidArgumentError(absl::StrCat("ConcatOp : Ranks of all input tensors should match: shape[0] = ",
                                                       first.shape().DebugString(), " vs. shape[", i,
                                                       "] = ", t.shape().DebugString()));
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
        return absl::InvalidArgumentError(absl::StrCat("Shapes of all inputs must match: values[0].shape = ",
                                                       first.shape().DebugString(), " != values[", i,
                                                       "].shape = ", t.shape().DebugString()));
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
      return absl::InvalidArgumentError(absl::StrCat("Input shape axis ", a, " must equal ", num, ", got shape ",
                                                     in.shape().DebugString()));
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
      VisitType(in.dtype(), [&](auto tag) {
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
    // Odometer over dims [0, rank-1) of the output, starting at row b.
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    int64_t rem = b;
    for (int d = rank - 2; d >= 0; --d) {
      idx[d] = rem % size[d];
      rem /= size[d];
    }
    for (int64_t r = b; r < e; ++r) {
      int64_t off = begin[rank - 1];
      for (int d = 0; d < rank - 1; ++d) off += (begin[d] + idx[d]) * stride[d];
      std::copy_n(in + off, row, out + r * row);
      for (int d = rank - 2; d >= 0; --d) {
        if (++idx[d] < size[d]) break;
        idx[d] = 0;
      }
    }
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
      return absl::InvalidArgumentError(absl::StrCat("Expected begin and size arguments to be vectors of length ",
                                                     rank, " for input of shape ", in.shape().DebugString(),
                                                     ", but got begin ", DimsString(begin), " and size ",
                                                     DimsString(size)));
    }
    for (int d = 0; d < rank; ++d) {
      int64_t dim = in.dim_size(d);
      if (begin[d] < 0 || begin[d] > dim) {
        return absl::InvalidArgumentError(absl::StrCat("Expected begin[", d, "] in [0, ", dim, "], but got ",
                                                       begin[d], " (input shape ", in.shape().DebugString(), ")"));
      }
      if (size[d] == -1) size[d] = dim - begin[d];
      if (size[d] < 0 || size[d] > dim - begin[d]) {
        return absl::InvalidArgumentError(absl::StrCat("Expected size[", d, "] in [0, ", dim - begin[d],
                                                       "], but got ", size[d], " (input shape ",
                                                       in.shape().DebugString(), ", begin ", DimsString(begin), ")"));
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
    VisitType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      CopyBox<T>(ctx, in.flat<T>().data(), dims, begin, size, out->flat<T>().data(), CopyCost(in.dtype()));
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Transpose

template <typename T>
void TransposeImpl(OpKernelContext* ctx, const T* in, const std::vector<int64_t>& in_dims,
                   const std::vector<int>& perm, T* out, int64_t cost) {
  int rank = static_cast<int>(in_dims.size());
  std::vector<int64_t> in_stride(in_dims.size(), 1);
  for (int d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in_dims[d + 1];
  std::vector<int64_t> out_dims(in_dims.size()), src_stride(in_dims.size());
  for (int d = 0; d < rank; ++d) {
    out_dims[d] = in_dims[perm[d]];
    src_stride[d] = in_stride[perm[d]];
  }
  int64_t row = out_dims[rank - 1];
  int64_t step = src_stride[rank - 1];
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= out_dims[d];
  if (rows == 0 || row == 0) return;
  ctx->ParallelFor(rows, row * (cost + 2), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    int64_t rem = b;
    for (int d = rank - 2; d >= 0; --d) {
      idx[d] = rem % out_dims[d];
      rem /= out_dims[d];
    }
    for (int64_t r = b; r < e; ++r) {
      int64_t off = 0;
      for (int d = 0; d < rank - 1; ++d) off += idx[d] * src_stride[d];
      const T* s = in + off;
      T* o = out + r * row;
      for (int64_t j = 0; j < row; ++j) o[j] = s[j * step];
      for (int d = rank - 2; d >= 0; --d) {
        if (++idx[d] < out_dims[d]) break;
        idx[d] = 0;
      }
    }
  });
}

class TransposeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> perm, ReadInts(ctx->input(1), "perm"));
    int rank = in.dims();
    if (static_cast<int>(perm.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("transpose expects a vector of size ", rank,
                                                     ". But input(1) is a vector of size ", perm.size()));
    }
    std::vector<bool> seen(perm.size(), false);
    std::vector<int64_t> out_dims;
    for (int d = 0; d < rank; ++d) {
      int64_t p = perm[d];
      if (p < 0 || p >= rank) {
        return absl::InvalidArgumentError(absl::StrCat(p, " is out of range [0 .. ", rank, ")"));
      }
      if (seen[p]) {
        return absl::InvalidArgumentError(absl::StrCat(p, " is duplicated in the permutation ", DimsString(perm)));
      }
      seen[p] = true;
      out_dims.push_back(in.dim_size(static_cast<int>(p)));
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    // Drop size-1 dimensions and merge runs that stay adjacent under perm.
    std::vector<int> kept;  // input dims of size != 1
    for (int d = 0; d < rank; ++d) {
      if (in.dim_size(d) != 1) kept.push_back(d);
    }
    std::vector<int> order;  // kept dims in output order
    for (int d = 0; d < rank; ++d) {
      if (in.dim_size(static_cast<int>(perm[d])) != 1) order.push_back(static_cast<int>(perm[d]));
    }
    // Groups: maximal runs of `order` that are consecutive input dims.
    std::vector<std::vector<int>> groups;
    for (int d : order) {
      if (!groups.empty() && groups.back().back() + 1 == d) {
        // d follows the previous input dim directly, unless a dropped size-1 dim is between (harmless).
        groups.back().push_back(d);
      } else {
        // Also merge across dropped size-1 dims.
        bool merged = false;
        if (!groups.empty()) {
          int prev = groups.back().back();
          bool only_ones = prev < d;
          for (int x = prev + 1; only_ones && x < d; ++x) only_ones = in.dim_size(x) == 1;
          if (only_ones) {
            groups.back().push_back(d);
            merged = true;
          }
        }
        if (!merged) groups.push_back({d});
      }
    }
    // Sort groups by their first input dim to get the collapsed input shape.
    std::vector<int> by_input(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) by_input[i] = static_cast<int>(i);
    std::sort(by_input.begin(), by_input.end(), [&](int x, int y) { return groups[x][0] < groups[y][0]; });
    bool identity = true;
    for (size_t i = 0; i < by_input.size(); ++i) identity = identity && by_input[i] == static_cast<int>(i);
    if (identity || in.NumElements() <= 1) {
      ASSIGN_OR_RETURN(Tensor o, in.Reshaped(out_shape));
      return ctx->set_output(0, std::move(o));
    }
    std::vector<int64_t> cin_dims(groups.size());
    std::vector<int> pos_in_input(groups.size());
    for (size_t j = 0; j < by_input.size(); ++j) {
      int g = by_input[j];
      int64_t n = 1;
      for (int d : groups[g]) n *= in.dim_size(d);
      cin_dims[j] = n;
      pos_in_input[g] = static_cast<int>(j);
    }
    std::vector<int> cperm(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) cperm[g] = pos_in_input[g];
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    VisitType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      TransposeImpl<T>(ctx, in.flat<T>().data(), cin_dims, cperm, out->flat<T>().data(), CopyCost(in.dtype()));
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Tile

class TileOp : public OpKernel {
 public:
  bool ExpandsInputs() const override { return true; }
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    ASSIGN_OR_RETURN(std::vector<int64_t> m, ReadInts(ctx->input(1), "multiples"));
    int rank = in.dims();
    if (static_cast<int>(m.size()) != rank) {
      return absl::InvalidArgumentError(absl::StrCat("Expected multiples argument to be a vector of length ", rank,
                                                     " but got length ", m.size(), " for input of shape ",
                                                     in.shape().DebugString()));
    }
    std::vector<int64_t> out_dims(m.size());
    for (int d = 0; d < rank; ++d) {
      if (m[d] < 0) {
        return absl::InvalidArgumentError(absl::StrCat("Expected multiples[", d, "] >= 0, but got ", m[d]));
      }
      if (!MultiplyWithoutOverflow(in.dim_size(d), m[d], &out_dims[d])) {
        return absl::InvalidArgumentError("Tile output has too many elements");
      }
    }
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(out_dims));
    if (out_shape == in.shape()) return ctx->set_output(0, in);
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    VisitType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = in.flat<T>().data();
      T* dst = out->flat<T>().data();
      std::vector<int64_t> in_stride(static_cast<size_t>(rank), 1);
      for (int d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in.dim_size(d + 1);
      int64_t in_row = in.dim_size(rank - 1);
      int64_t row = out_dims[rank - 1];
      int64_t rows = out_shape.num_elements() / row;
      ctx->ParallelFor(rows, row * CopyCost(in.dtype()), [&](int64_t b, int64_t e) {
        std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
        int64_t rem = b;
        for (int d = rank - 2; d >= 0; --d) {
          idx[d] = rem % out_dims[d];
          rem /= out_dims[d];
        }
        for (int64_t r = b; r < e; ++r) {
          int64_t off = 0;
          for (int d = 0; d < rank - 1; ++d) off += (idx[d] % in.dim_size(d)) * in_stride[d];
          T* o = dst + r * row;
          for (int64_t k = 0; k < m[rank - 1]; ++k) std::copy_n(src + off, in_row, o + k * in_row);
          for (int d = rank - 2; d >= 0; --d) {
            if (++idx[d] < out_dims[d]) break;
            idx[d] = 0;
          }
        }
      });
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Range

template <typename T>
absl::StatusOr<int64_t> RangeSize(T start, T limit, T delta) {
  if (delta == 0) return absl::InvalidArgumentError("Requires delta != 0");
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(absl::StrCat("Requires start <= limit when delta > 0: ", start, "/", limit));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(absl::StrCat("Requires start >= limit when delta < 0: ", start, "/", limit));
  }
  if constexpr (std::is_integral_v<T>) {
    uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                              : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : 0 - static_cast<uint64_t>(delta);
    uint64_t n = span / step + (span % step != 0 ? 1 : 0);
    if (n > static_cast<uint64_t>(INT64_MAX)) return absl::InvalidArgumentError("Range has too many elements");
    return static_cast<int64_t>(n);
  } else {
    if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
      return absl::InvalidArgumentError("Range requires finite start, limit and delta");
    }
    double n = std::ceil(
        std::abs((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta)));
    if (!(n < 9.2e18)) return absl::InvalidArgumentError("Range has too many elements");
    return static_cast<int64_t>(n);
  }
}

template <typename T>
class RangeOp : public OpKernel {
 public:
  bool ExpandsInputs() const override { return true; }
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < 3; ++i) {
      if (ctx->input(i).dims() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(i == 0 ? "start" : i == 1 ? "limit" : "delta",
                                                       " must be a scalar, not shape ",
                                                       ctx->input(i).shape().DebugString()));
      }
    }
    T start = ctx->input(0).scalar<T>(), limit = ctx->input(1).scalar<T>(), delta = ctx->input(2).scalar<T>();
    ASSIGN_OR_RETURN(int64_t n, RangeSize(start, limit, delta));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, TensorShape({n})));
    auto f = out->flat<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        f[i] = static_cast<T>(static_cast<U>(start) + static_cast<U>(i) * static_cast<U>(delta));
      } else {
        f[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      }
    }
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// OneHot

class OneHotOp : public OpKernel {
 public:
  bool ExpandsInputs() const override { return true; }
  using OpKernel::OpKernel;
  absl::Status Init(OpKernelConstruction* c) override {
    ASSIGN_OR_RETURN(axis_, GetAttrInt(c->def(), "axis"));
    return absl::OkStatus();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    ASSIGN_OR_RETURN(int64_t depth, ReadScalarInt(ctx->input(1), "depth"));
    const Tensor& on = ctx->input(2);
    const Tensor& off = ctx->input(3);
    if (on.dims() != 0 || off.dims() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("on_value and off_value must be scalars, got shapes ",
                                                     on.shape().DebugString(), " and ", off.shape().DebugString()));
    }
    if (depth < 0) return absl::InvalidArgumentError(absl::StrCat("depth must be non-negative, got: ", depth));
    int rank = indices.dims();
    if (axis_ < -1 || axis_ > rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected axis to be -1 or between [0, ", rank, "], got ", axis_));
    }
    int a = axis_ == -1 ? rank : static_cast<int>(axis_);
    std::vector<int64_t> dims(indices.shape().dim_sizes().begin(), indices.shape().dim_sizes().end());
    dims.insert(dims.begin() + a, depth);
    ASSIGN_OR_RETURN(TensorShape out_shape, TensorShape::FromDims(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, out_shape));
    int64_t prefix = 1;
    for (int d = 0; d < a; ++d) prefix *= indices.dim_size(d);
    int64_t suffix = prefix == 0 ? 0 : indices.NumElements() / prefix;
    if (out_shape.num_elements() == 0) return absl::OkStatus();
    std::vector<int64_t> idx(static_cast<size_t>(indices.NumElements()));
    if (indices.dtype() == DT_INT32) {
      std::copy(indices.flat<int32_t>().begin(), indices.flat<int32_t>().end(), idx.begin());
    } else if (indices.dtype() == DT_INT64) {
      std::copy(indices.flat<int64_t>().begin(), indices.flat<int64_t>().end(), idx.begin());
    } else {
      std::copy(indices.flat<uint8_t>().begin(), indices.flat<uint8_t>().end(), idx.begin());
    }
    VisitType(out->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T& on_v = on.scalar<T>();
      const T& off_v = off.scalar<T>();
      T* o = out->flat<T>().data();
      ctx->ParallelFor(prefix, depth * suffix * CopyCost(out->dtype()), [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          T* block = o + p * depth * suffix;
          std::fill(block, block + depth * suffix, off_v);
          for (int64_t s = 0; s < suffix; ++s) {
            int64_t v = idx[static_cast<size_t>(p * suffix + s)];
            if (v >= 0 && v < depth) block[v * suffix + s] = on_v;
          }
        }
      });
    });
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = -1;
};

}  // namespace

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
  r->Register<TransposeOp>("Transpose", kCpu, DT_INVALID);
  r->Register<TileOp>("Tile", kCpu, DT_INVALID);
  r->Register<RangeOp<int32_t>>("Range", kCpu, DT_INT32, "Tidx");
  r->Register<RangeOp<int64_t>>("Range", kCpu, DT_INT64, "Tidx");
  r->Register<RangeOp<float>>("Range", kCpu, DT_FLOAT, "Tidx");
  r->Register<RangeOp<double>>("Range", kCpu, DT_DOUBLE, "Tidx");
  r->Register<OneHotOp>("OneHot", kCpu, DT_INVALID);
}

}  // namespace distflow

// CPU kernels for the array ops that rearrange or generate elements:
// Transpose and Tile (every dtype, typed inside through VisitDataType),
// Range and OneHot. Registered from RegisterArrayKernels (array_kernels.cc).
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
// Transpose

template <typename T>
void TransposeImpl(OpKernelContext* ctx, const T* in, const std::vector<int64_t>& in_dims, const std::vector<int>& perm,
                   T* out, int64_t cost) {
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
    kernel_util::ForEachRow(out_dims, b, e, [&](int64_t r, const int64_t* idx) {
      int64_t off = 0;
      for (int d = 0; d < rank - 1; ++d) off += idx[d] * src_stride[d];
      const T* s = in + off;
      T* o = out + r * row;
      for (int64_t j = 0; j < row; ++j) o[j] = s[j * step];
    });
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
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      TransposeImpl<T>(ctx, in.flat<T>().data(), cin_dims, cperm, out->flat<T>().data(), CopyCost(in.dtype()));
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Tile

class TileOp : public OpKernel, public WorkFromValues {
 public:
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  int64_t EstimatedWorkFromValues(const std::vector<const Tensor*>& inputs) const override {
    if (inputs.size() != 2 || inputs[0] == nullptr) return -1;
    return ProductOfValues(inputs[1], "multiples", inputs[0]->NumElements());
  }
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
    VisitDataType(in.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = in.flat<T>().data();
      T* dst = out->flat<T>().data();
      std::vector<int64_t> in_stride(static_cast<size_t>(rank), 1);
      for (int d = rank - 2; d >= 0; --d) in_stride[d] = in_stride[d + 1] * in.dim_size(d + 1);
      int64_t in_row = in.dim_size(rank - 1);
      int64_t row = out_dims[rank - 1];
      int64_t rows = out_shape.num_elements() / row;
      ctx->ParallelFor(rows, row * CopyCost(in.dtype()), [&](int64_t b, int64_t e) {
        kernel_util::ForEachRow(out_dims, b, e, [&](int64_t r, const int64_t* idx) {
          int64_t off = 0;
          for (int d = 0; d < rank - 1; ++d) off += (idx[d] % in.dim_size(d)) * in_stride[d];
          T* o = dst + r * row;
          for (int64_t k = 0; k < m[rank - 1]; ++k) std::copy_n(src + off, in_row, o + k * in_row);
        });
      });
    });
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Range

template <typename T>
class RangeOp : public OpKernel, public WorkFromValues {
 public:
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
  int64_t EstimatedWorkFromValues(const std::vector<const Tensor*>& inputs) const override {
    if (inputs.size() != 3) return -1;
    for (const Tensor* t : inputs) {
      if (t == nullptr || t->dims() != 0 || t->dtype() != DataTypeToEnum<T>::value) return -1;
    }
    absl::StatusOr<int64_t> n = RangeSize(inputs[0]->scalar<T>(), inputs[1]->scalar<T>(), inputs[2]->scalar<T>());
    return n.ok() ? *n : -1;
  }
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < 3; ++i) {
      if (ctx->input(i).dims() != 0) {
        return absl::InvalidArgumentError(absl::StrCat(i == 0   ? "start"
                                                       : i == 1 ? "limit"
                                                                : "delta",
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
  int64_t EstimatedWork(const std::vector<TensorShape>&) const override { return -1; }
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
      return absl::InvalidArgumentError(absl::StrCat("Expected axis to be -1 or between [0, ", rank, "], got ", axis_));
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
    VisitDataType(out->dtype(), [&](auto tag) {
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

void RegisterArrayLayoutKernels(KernelRegistry* r) {
  r->Register<TransposeOp>("Transpose", kCpu, DT_INVALID);
  r->Register<TileOp>("Tile", kCpu, DT_INVALID);
  r->Register<RangeOp<int32_t>>("Range", kCpu, DT_INT32, "Tidx");
  r->Register<RangeOp<int64_t>>("Range", kCpu, DT_INT64, "Tidx");
  r->Register<RangeOp<float>>("Range", kCpu, DT_FLOAT, "Tidx");
  r->Register<RangeOp<double>>("Range", kCpu, DT_DOUBLE, "Tidx");
  r->Register<OneHotOp>("OneHot", kCpu, DT_INVALID);
}

}  // namespace distflow

// Kernels of the sparse ops (graph/ops/sparse_ops.cc): Gather/GatherV2,
// Unique, UnsortedSegmentSum, DynamicPartition/DynamicStitch,
// SparseSegmentSum/Mean and SparseSegmentMeanGrad. Rows are copied as
// contiguous runs (memcpy for plain types); every id is checked before any
// write (sparse_index.h), so a bad id fails the step with the op, the node,
// the position and the bound, and leaves nothing half-written. The Scatter*
// kernels, which update variables, are in scatter_kernels.cc.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/sparse_index.h"
#include "kernels/kernel_registry.h"
#include "kernels/resource_mgr.h"

namespace distflow {
namespace {

using sparse_index::InnerSize;

// Copies n elements of T (memcpy for trivially copyable types).
template <typename T>
void CopyRun(const T* src, int64_t n, T* dst) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy(src, src + n, dst);
  }
}

absl::StatusOr<TensorShape> ShapeOf(std::vector<int64_t> dims) { return TensorShape::FromDims(dims); }

// out[o, i, :] = params[o, indices[i], :] with params viewed as [outer, n, inner].
// Params read from a variable arrive as the variable itself (the kernels
// say ReadsVariableInputUnderLock(0), so the executor takes no snapshot):
// the rows are copied under its reader lock. A snapshot held while the rows
// are copied would make a sparse update of the same table that runs
// meanwhile (another worker's step) copy the whole table before writing its
// rows.
absl::Status GatherAt(OpKernelContext* ctx, const std::string& op, const std::string& node, int64_t axis) {
  Var* var = ctx->input_ref(0);
  std::optional<absl::ReaderMutexLock> lock;
  const Tensor* params_in = &ctx->input(0);
  if (var != nullptr) {
    lock.emplace(var->mu());
    if (!var->value().IsInitialized()) {
      lock.reset();
      return var->Read().status();
    }
    params_in = &var->value();
  }
  const Tensor& params = *params_in;
  const Tensor& indices = ctx->input(1);
  const int64_t rank = params.dims();
  if (rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node,
                                                   "'): params must be at least a vector, got "
                                                   "shape ",
                                                   params.shape().DebugString()));
  }
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): axis ", axis, " is out of range [", -rank,
                                                   ", ", rank, ") for params of shape ", params.shape().DebugString()));
  }
  if (axis < 0) axis += rank;
  const int a = static_cast<int>(axis);
  const int64_t n = params.dim_size(a);
  ASSIGN_OR_RETURN(std::vector<int64_t> ids, sparse_index::ReadInRange(indices, n, op, node, "indices"));
  std::vector<int64_t> dims(params.shape().dim_sizes().begin(), params.shape().dim_sizes().begin() + a);
  for (int64_t d : indices.shape().dim_sizes()) dims.push_back(d);
  for (int k = a + 1; k < rank; ++k) dims.push_back(params.dim_size(k));
  ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
  ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
  int64_t outer = 1;
  for (int k = 0; k < a; ++k) outer *= params.dim_size(k);
  const int64_t inner = InnerSize(params.shape(), a + 1);
  const int64_t m = static_cast<int64_t>(ids.size());
  VisitDataType(params.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = params.flat<T>().data();
    T* dst = out->flat<T>().data();
    ctx->ParallelFor(outer * m, inner, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / m, i = r % m;
        CopyRun(src + (o * n + ids[static_cast<size_t>(i)]) * inner, inner, dst + r * inner);
      }
    });
  });
  return absl::OkStatus();
}

class GatherOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return GatherAt(ctx, "Gather", name(), 0); }
  bool ReadsVariableInputUnderLock(int i) const override { return i == 0; }
  // The rows copied, not the table: a lookup of a few hundred rows runs
  // inline (on a ps, on the RunGraph's thread) rather than waiting for a
  // pool thread.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (in.size() < 2 || in[0].dims() < 1 || in[0].dim_size(0) == 0) return OpKernel::EstimatedWork(in);
    return in[1].num_elements() * (in[0].num_elements() / in[0].dim_size(0)) + in[1].num_elements();
  }
};

class GatherV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool ReadsVariableInputUnderLock(int i) const override { return i == 0; }
  // The axis is a value: the rows copied along the axis that makes the most.
  int64_t EstimatedWork(const std::vector<TensorShape>& in) const override {
    if (in.size() < 2 || in[0].dims() < 1) return OpKernel::EstimatedWork(in);
    int64_t smallest = in[0].dim_size(0);
    for (int k = 1; k < in[0].dims(); ++k) smallest = std::min(smallest, in[0].dim_size(k));
    if (smallest == 0) return OpKernel::EstimatedWork(in);
    return in[1].num_elements() * (in[0].num_elements() / smallest) + in[1].num_elements();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t axis, kernel_util::ReadScalarInt(ctx->input(2), "GatherV2 axis"));
    return GatherAt(ctx, "GatherV2", name(), axis);
  }
};

// y: the distinct values of x in order of first appearance; idx: x[i] == y[idx[i]].
class UniqueOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (x.dims() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Unique (node '", name(), "'): x must be a vector, got shape ", x.shape().DebugString()));
    }
    const int64_t n = x.NumElements();
    std::vector<int64_t> idx(static_cast<size_t>(n));
    int64_t num_unique = 0;
    Tensor y;
    VisitDataType(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto in = x.flat<T>();
      std::unordered_map<T, int64_t> first;
      first.reserve(static_cast<size_t>(n));
      std::vector<T> values;
      for (int64_t i = 0; i < n; ++i) {
        auto [it, inserted] = first.emplace(in[static_cast<size_t>(i)], num_unique);
        if (inserted) {
          values.push_back(in[static_cast<size_t>(i)]);
          ++num_unique;
        }
        idx[static_cast<size_t>(i)] = it->second;
      }
      y = Tensor::FromVector<T>(values);
    });
    RETURN_IF_ERROR(ctx->set_output(0, std::move(y)));
    ASSIGN_OR_RETURN(Tensor * out_idx, ctx->allocate_output(1, x.shape()));
    if (out_idx->dtype() == DT_INT64) {
      std::copy(idx.begin(), idx.end(), out_idx->flat<int64_t>().data());
    } else {
      std::transform(idx.begin(), idx.end(), out_idx->flat<int32_t>().data(),
                     [](int64_t v) { return static_cast<int32_t>(v); });
    }
    return absl::OkStatus();
  }
};

// output[segment_ids[i], :] += data[i, :]; negative ids are dropped (as in TF).
class UnsortedSegmentSumOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    const Tensor& seg = ctx->input(1);
    ASSIGN_OR_RETURN(int64_t num, kernel_util::ReadScalarInt(ctx->input(2), "UnsortedSegmentSum num_segments"));
    if (num < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("UnsortedSegmentSum (node '", name(), "'): num_segments = ", num, " is negative"));
    }
    const int r = seg.dims();
    bool prefix = r <= data.dims();
    for (int k = 0; prefix && k < r; ++k) prefix = seg.dim_size(k) == data.dim_size(k);
    if (!prefix) {
      return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum (node '", name(), "'): segment_ids of shape ",
                                                     seg.shape().DebugString(), " must be a prefix of data's shape ",
                                                     data.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, sparse_index::Read(seg, "UnsortedSegmentSum", name(), "segment_ids"));
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= num) {
        return absl::InvalidArgumentError(absl::StrCat("UnsortedSegmentSum (node '", name(), "'): segment_ids[", i,
                                                       "] = ", ids[i], " is not in [0, ", num, ") (num_segments)"));
      }
    }
    std::vector<int64_t> dims = {num};
    for (int k = r; k < data.dims(); ++k) dims.push_back(data.dim_size(k));
    ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t inner = InnerSize(data.shape(), r);
    VisitDataType(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
        const T* src = data.flat<T>().data();
        T* dst = out->flat<T>().data();
        std::fill(dst, dst + out->NumElements(), T{});
        for (size_t i = 0; i < ids.size(); ++i) {
          if (ids[i] < 0) continue;
          T* row = dst + ids[i] * inner;
          const T* in = src + static_cast<int64_t>(i) * inner;
          for (int64_t j = 0; j < inner; ++j) row[j] += in[j];
        }
      }
    });
    return absl::OkStatus();
  }
};

// outputs[p] = the rows data[i] with partitions[i] == p, in order.
class DynamicPartitionOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    const Tensor& parts = ctx->input(1);
    const int r = parts.dims();
    bool prefix = r <= data.dims();
    for (int k = 0; prefix && k < r; ++k) prefix = parts.dim_size(k) == data.dim_size(k);
    if (!prefix) {
      return absl::InvalidArgumentError(absl::StrCat("DynamicPartition (node '", name(), "'): partitions of shape ",
                                                     parts.shape().DebugString(), " must be a prefix of data's shape ",
                                                     data.shape().DebugString()));
    }
    const int num = ctx->num_outputs();
    ASSIGN_OR_RETURN(std::vector<int64_t> p,
                     sparse_index::ReadInRange(parts, num, "DynamicPartition", name(), "partitions"));
    std::vector<int64_t> counts(static_cast<size_t>(num), 0);
    for (int64_t v : p) ++counts[static_cast<size_t>(v)];
    const int64_t inner = InnerSize(data.shape(), r);
    std::vector<Tensor*> outs;
    for (int i = 0; i < num; ++i) {
      std::vector<int64_t> dims = {counts[static_cast<size_t>(i)]};
      for (int k = r; k < data.dims(); ++k) dims.push_back(data.dim_size(k));
      ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
      ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(i, shape));
      outs.push_back(out);
    }
    VisitDataType(data.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* src = data.flat<T>().data();
      std::vector<int64_t> next(static_cast<size_t>(num), 0);
      for (size_t i = 0; i < p.size(); ++i) {
        const size_t q = static_cast<size_t>(p[i]);
        CopyRun(src + static_cast<int64_t>(i) * inner, inner, outs[q]->flat<T>().data() + next[q]++ * inner);
      }
    });
    return absl::OkStatus();
  }
};

// merged[indices[m][i], :] = data[m][i, :]; later (m, i) win.
class DynamicStitchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() / 2;
    std::vector<std::vector<int64_t>> idx(static_cast<size_t>(n));
    int64_t first = 0;
    const Tensor& d0 = ctx->input(n);
    const int r0 = ctx->input(0).dims();
    if (r0 > d0.dims()) {
      return absl::InvalidArgumentError(absl::StrCat("DynamicStitch (node '", name(), "'): data[0] of shape ",
                                                     d0.shape().DebugString(), " has fewer dims than indices[0] ",
                                                     ctx->input(0).shape().DebugString()));
    }
    const std::vector<int64_t> tail(d0.shape().dim_sizes().begin() + r0, d0.shape().dim_sizes().end());
    for (int m = 0; m < n; ++m) {
      const Tensor& ind = ctx->input(m);
      const Tensor& data = ctx->input(n + m);
      std::vector<int64_t> want(ind.shape().dim_sizes().begin(), ind.shape().dim_sizes().end());
      want.insert(want.end(), tail.begin(), tail.end());
      if (std::vector<int64_t>(data.shape().dim_sizes().begin(), data.shape().dim_sizes().end()) != want) {
        return absl::InvalidArgumentError(absl::StrCat("DynamicStitch (node '", name(), "'): data[", m, "] has shape ",
                                                       data.shape().DebugString(), " but indices[", m, "] has shape ",
                                                       ind.shape().DebugString(), " and rows have shape ",
                                                       kernel_util::DimsString(tail), " (from data[0])"));
      }
      ASSIGN_OR_RETURN(idx[static_cast<size_t>(m)],
                       sparse_index::Read(ind, "DynamicStitch", name(), absl::StrCat("indices[", m, "]")));
      for (size_t i = 0; i < idx[static_cast<size_t>(m)].size(); ++i) {
        const int64_t v = idx[static_cast<size_t>(m)][i];
        if (v < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("DynamicStitch (node '", name(), "'): indices[", m, "][", i, "] = ", v, " is negative"));
        }
        first = std::max(first, v + 1);
      }
    }
    std::vector<int64_t> dims = {first};
    dims.insert(dims.end(), tail.begin(), tail.end());
    ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    int64_t inner = 1;
    for (int64_t d : tail) inner *= d;
    VisitDataType(d0.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dst = out->flat<T>().data();
      std::fill(dst, dst + out->NumElements(), T{});
      for (int m = 0; m < n; ++m) {
        const T* src = ctx->input(n + m).template flat<T>().data();
        const std::vector<int64_t>& ids = idx[static_cast<size_t>(m)];
        for (size_t i = 0; i < ids.size(); ++i)
          CopyRun(src + static_cast<int64_t>(i) * inner, inner, dst + ids[i] * inner);
      }
    });
    return absl::OkStatus();
  }
};

// Checks indices/segment_ids of SparseSegment* and returns the segment count.
absl::StatusOr<int64_t> CheckSegments(const std::string& op, const std::string& node, const std::vector<int64_t>& idx,
                                      const std::vector<int64_t>& seg) {
  if (idx.size() != seg.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): indices has ", idx.size(),
                                                   " entries but segment_ids has ", seg.size()));
  }
  for (size_t i = 0; i < seg.size(); ++i) {
    if (seg[i] < 0 || (i > 0 && seg[i] < seg[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat(op, " (node '", node, "'): segment_ids[", i, "] = ", seg[i],
                                                     " (segment ids must be >= 0 and sorted)"));
    }
  }
  return seg.empty() ? 0 : seg.back() + 1;
}

// output[s, :] = sum (or mean) of data[indices[i], :] over i with segment_ids[i] == s.
template <typename T, bool kMean>
class SparseSegmentReduceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const char* op = kMean ? "SparseSegmentMean" : "SparseSegmentSum";
    const Tensor& data = ctx->input(0);
    if (data.dims() < 1 || ctx->input(1).dims() != 1 || ctx->input(2).dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, " (node '", name(),
                                                     "'): data must be at least a vector and "
                                                     "indices and segment_ids vectors; got ",
                                                     data.shape().DebugString(), ", ",
                                                     ctx->input(1).shape().DebugString(), ", ",
                                                     ctx->input(2).shape().DebugString()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> idx,
                     sparse_index::ReadInRange(ctx->input(1), data.dim_size(0), op, name(), "indices"));
    ASSIGN_OR_RETURN(std::vector<int64_t> seg, sparse_index::Read(ctx->input(2), op, name(), "segment_ids"));
    ASSIGN_OR_RETURN(int64_t num, CheckSegments(op, name(), idx, seg));
    std::vector<int64_t> dims(data.shape().dim_sizes().begin(), data.shape().dim_sizes().end());
    dims[0] = num;
    ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t inner = InnerSize(data.shape(), 1);
    const T* src = data.flat<T>().data();
    T* dst = out->flat<T>().data();
    std::fill(dst, dst + out->NumElements(), T{});
    std::vector<int64_t> count(static_cast<size_t>(num), 0);
    for (size_t i = 0; i < idx.size(); ++i) {
      T* row = dst + seg[i] * inner;
      const T* in = src + idx[i] * inner;
      for (int64_t j = 0; j < inner; ++j) row[j] += in[j];
      ++count[static_cast<size_t>(seg[i])];
    }
    if (kMean) {
      for (int64_t s = 0; s < num; ++s) {
        const int64_t c = count[static_cast<size_t>(s)];
        if (c <= 1) continue;
        for (int64_t j = 0; j < inner; ++j) dst[s * inner + j] /= static_cast<T>(c);
      }
    }
    return absl::OkStatus();
  }
};

// output[indices[i], :] += grad[segment_ids[i], :] / count(segment_ids[i]).
template <typename T>
class SparseSegmentMeanGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const char* op = "SparseSegmentMeanGrad";
    const Tensor& grad = ctx->input(0);
    ASSIGN_OR_RETURN(int64_t dim0, kernel_util::ReadScalarInt(ctx->input(3), "SparseSegmentMeanGrad output_dim0"));
    if (grad.dims() < 1 || dim0 < 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, " (node '", name(), "'): grad of shape ",
                                                     grad.shape().DebugString(), " and output_dim0 = ", dim0));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> idx, sparse_index::ReadInRange(ctx->input(1), dim0, op, name(), "indices"));
    ASSIGN_OR_RETURN(std::vector<int64_t> seg, sparse_index::Read(ctx->input(2), op, name(), "segment_ids"));
    ASSIGN_OR_RETURN(int64_t num, CheckSegments(op, name(), idx, seg));
    if (num > grad.dim_size(0)) {
      return absl::InvalidArgumentError(absl::StrCat(op, " (node '", name(), "'): segment_ids reach ", num - 1,
                                                     " but grad has ", grad.dim_size(0), " rows"));
    }
    std::vector<int64_t> dims(grad.shape().dim_sizes().begin(), grad.shape().dim_sizes().end());
    dims[0] = dim0;
    ASSIGN_OR_RETURN(TensorShape shape, ShapeOf(dims));
    ASSIGN_OR_RETURN(Tensor * out, ctx->allocate_output(0, shape));
    const int64_t inner = InnerSize(grad.shape(), 1);
    std::vector<int64_t> count(static_cast<size_t>(num), 0);
    for (int64_t s : seg) ++count[static_cast<size_t>(s)];
    const T* g = grad.flat<T>().data();
    T* dst = out->flat<T>().data();
    std::fill(dst, dst + out->NumElements(), T{});
    for (size_t i = 0; i < idx.size(); ++i) {
      const T scale = T(1) / static_cast<T>(count[static_cast<size_t>(seg[i])]);
      for (int64_t j = 0; j < inner; ++j) dst[idx[i] * inner + j] += g[seg[i] * inner + j] * scale;
    }
    return absl::OkStatus();
  }
};

template <typename T>
void RegisterSegmentFor(KernelRegistry* r) {
  const DataType dt = DataTypeToEnum<T>::value;
  r->Register<SparseSegmentReduceOp<T, false>>("SparseSegmentSum", kCpu, dt);
  r->Register<SparseSegmentReduceOp<T, true>>("SparseSegmentMean", kCpu, dt);
  r->Register<SparseSegmentMeanGradOp<T>>("SparseSegmentMeanGrad", kCpu, dt);
}

}  // namespace

void RegisterSparseKernels(KernelRegistry* r) {
  r->Register<GatherOp>("Gather", kCpu, DT_INVALID);
  r->Register<GatherV2Op>("GatherV2", kCpu, DT_INVALID);
  r->Register<UniqueOp>("Unique", kCpu, DT_INVALID);
  r->Register<UnsortedSegmentSumOp>("UnsortedSegmentSum", kCpu, DT_INVALID);
  r->Register<DynamicPartitionOp>("DynamicPartition", kCpu, DT_INVALID);
  r->Register<DynamicStitchOp>("DynamicStitch", kCpu, DT_INVALID);
  RegisterSegmentFor<float>(r);
  RegisterSegmentFor<double>(r);
}

}  // namespace distflow

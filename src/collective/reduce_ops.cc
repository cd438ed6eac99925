#include "collective/reduce_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace distflow {
namespace {

template <typename T>
void Merge(MergeOp op, const T* src, T* dst, int64_t n) {
  switch (op) {
    case MergeOp::kAdd:
      for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
      return;
    case MergeOp::kMul:
      for (int64_t i = 0; i < n; ++i) dst[i] *= src[i];
      return;
    case MergeOp::kMax:
      for (int64_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      return;
    case MergeOp::kMin:
      for (int64_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      return;
    case MergeOp::kAdasum:  // not element-wise: MergeInto refuses it
      return;
  }
}

template <typename T>
void Divide(int group_size, T* dst, int64_t n) {
  const T d = static_cast<T>(group_size);
  for (int64_t i = 0; i < n; ++i) dst[i] /= d;
}

}  // namespace

bool IsCollectiveDtype(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE || dt == DT_INT32 || dt == DT_INT64; }

absl::Status MergeInto(MergeOp op, const Tensor& src, Tensor* dst) {
  if (op == MergeOp::kAdasum) {
    return absl::InternalError("Adasum is not an element-wise merge; collective/adasum.h reduces it");
  }
  if (src.dtype() != dst->dtype() || src.NumElements() != dst->NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge ", DataTypeName(src.dtype()), " ",
                                                   src.shape().DebugString(), " into ", DataTypeName(dst->dtype()), " ",
                                                   dst->shape().DebugString()));
  }
  const int64_t n = dst->NumElements();
  if (n == 0) return absl::OkStatus();
  switch (dst->dtype()) {
    case DT_FLOAT:
      Merge(op, src.flat<float>().data(), dst->flat<float>().data(), n);
      return absl::OkStatus();
    case DT_DOUBLE:
      Merge(op, src.flat<double>().data(), dst->flat<double>().data(), n);
      return absl::OkStatus();
    case DT_INT32:
      Merge(op, src.flat<int32_t>().data(), dst->flat<int32_t>().data(), n);
      return absl::OkStatus();
    case DT_INT64:
      Merge(op, src.flat<int64_t>().data(), dst->flat<int64_t>().data(), n);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("collectives reduce float32, float64, int32 and int64, not ", DataTypeName(dst->dtype())));
  }
}

absl::Status ApplyFinal(FinalOp op, int group_size, Tensor* dst) {
  if (op == FinalOp::kId || group_size == 1) return absl::OkStatus();
  const int64_t n = dst->NumElements();
  if (n == 0) return absl::OkStatus();
  switch (dst->dtype()) {
    case DT_FLOAT:
      Divide(group_size, dst->flat<float>().data(), n);
      return absl::OkStatus();
    case DT_DOUBLE:
      Divide(group_size, dst->flat<double>().data(), n);
      return absl::OkStatus();
    case DT_INT32:
      Divide(group_size, dst->flat<int32_t>().data(), n);
      return absl::OkStatus();
    case DT_INT64:
      Divide(group_size, dst->flat<int64_t>().data(), n);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("collectives reduce float32, float64, int32 and int64, not ", DataTypeName(dst->dtype())));
  }
}

}  // namespace distflow

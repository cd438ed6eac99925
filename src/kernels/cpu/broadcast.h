// Numpy-style broadcasting of two tensors for elementwise CPU kernels.
//
// BroadcastPlan computes the output shape and a collapsed description of how
// each input maps onto the output: adjacent dimensions in which both inputs
// behave alike (each either present or broadcast) are merged, and dimensions
// of size 1 are dropped, so that the common cases become rank 1 (same shape:
// both present; scalar vs tensor: one broadcast) and [3,1]+[1,4] becomes rank 2.
//
// ForEachBroadcastRun walks a range of output elements as contiguous runs
// along the innermost collapsed dimension, giving each run's offsets into the
// inputs and whether each input advances (inner stride 1) or stays (0).
//
//   ASSIGN_OR_RETURN(BroadcastPlan plan, BroadcastPlan::Make(a.shape(), b.shape()));
//   ForEachBroadcastRun(plan, begin, end, [&](int64_t out, int64_t ia, int64_t ib, int64_t n, bool sa, bool sb) {...});
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "distflow/tensor_shape.h"

namespace distflow {

struct BroadcastPlan {
  TensorShape output_shape;
  // Collapsed output dimensions (none equal to 1); empty for a one-element output.
  absl::InlinedVector<int64_t, 4> dims;
  // Element strides of each input over `dims`; 0 where the input is broadcast.
  absl::InlinedVector<int64_t, 4> a_strides;
  absl::InlinedVector<int64_t, 4> b_strides;

  bool same_shape = false;  // the inputs have identical shapes

  // InvalidArgument "Incompatible shapes: [2,3] vs [4]" if they do not broadcast.
  static absl::StatusOr<BroadcastPlan> Make(const TensorShape& a, const TensorShape& b) {
    BroadcastPlan p;
    p.same_shape = (a == b);
    const int rank = std::max(a.dims(), b.dims());
    absl::InlinedVector<int64_t, 4> out(static_cast<size_t>(rank));
    absl::InlinedVector<int64_t, 4> cdims;
    absl::InlinedVector<bool, 4> a_present, b_present;
    for (int i = 0; i < rank; ++i) {
      const int ia = a.dims() - rank + i, ib = b.dims() - rank + i;
      const int64_t da = ia >= 0 ? a.dim_size(ia) : 1;
      const int64_t db = ib >= 0 ? b.dim_size(ib) : 1;
      int64_t d;
      if (da == db) {
        d = da;
      } else if (da == 1) {
        d = db;
      } else if (db == 1) {
        d = da;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("Incompatible shapes: ", a.DebugString(), " vs ", b.DebugString()));
      }
      out[static_cast<size_t>(i)] = d;
      if (d == 1) continue;  // contributes nothing to the iteration
      const bool pa = (da == d), pb = (db == d);
      if (!cdims.empty() && a_present.back() == pa && b_present.back() == pb) {
        cdims.back() *= d;
      } else {
        cdims.push_back(d);
        a_present.push_back(pa);
        b_present.push_back(pb);
      }
    }
    ASSIGN_OR_RETURN(TensorShape s, TensorShape::FromDims(out));
    p.output_shape = s;
    p.dims = cdims;
    const size_t r = cdims.size();
    p.a_strides.assign(r, 0);
    p.b_strides.assign(r, 0);
    int64_t sa = 1, sb = 1;
    for (size_t k = r; k-- > 0;) {
      if (a_present[k]) {
        p.a_strides[k] = sa;
        sa *= cdims[k];
      }
      if (b_present[k]) {
        p.b_strides[k] = sb;
        sb *= cdims[k];
      }
    }
    return p;
  }
};

// Calls fn(out_offset, a_offset, b_offset, n, a_advances, b_advances) for
// contiguous runs covering output elements [begin, end). Within a run, output
// element out_offset + j reads a[a_offset + (a_advances ? j : 0)] and likewise b.
template <typename Fn>
void ForEachBroadcastRun(const BroadcastPlan& p, int64_t begin, int64_t end, Fn&& fn) {
  if (begin >= end) return;
  const int r = static_cast<int>(p.dims.size());
  if (r == 0) {  // a one-element output
    fn(begin, int64_t{0}, int64_t{0}, end - begin, false, false);
    return;
  }
  const size_t inner = static_cast<size_t>(r - 1);
  const int64_t inner_dim = p.dims[inner];
  const bool a_adv = p.a_strides[inner] != 0, b_adv = p.b_strides[inner] != 0;
  // Multi-index of `begin`.
  absl::InlinedVector<int64_t, 4> idx(static_cast<size_t>(r), 0);
  int64_t rem = begin;
  for (size_t k = static_cast<size_t>(r); k-- > 0;) {
    idx[k] = rem % p.dims[k];
    rem /= p.dims[k];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t ia = 0, ib = 0;
    for (size_t k = 0; k < static_cast<size_t>(r); ++k) {
      ia += idx[k] * p.a_strides[k];
      ib += idx[k] * p.b_strides[k];
    }
    const int64_t n = std::min(inner_dim - idx[inner], end - pos);
    fn(pos, ia, ib, n, a_adv, b_adv);
    pos += n;
    idx[inner] += n;
    // Carry into the outer dimensions.
    for (size_t k = inner; k > 0 && idx[k] >= p.dims[k]; --k) {
      idx[k] = 0;
      ++idx[k - 1];
    }
  }
}

}  // namespace distflow

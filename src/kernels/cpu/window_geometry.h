// The geometry of a 2-D convolution or pooling over an NHWC input (sizes,
// strides, TensorFlow's SAME/VALID padding), shared by the convolution
// (conv_kernels.cc) and pooling (pool_kernels.cc) kernels. Header-only,
// stateless.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "distflow/tensor.h"
#include "graph/window.h"

namespace distflow {
namespace window_geometry {

// Geometry of a convolution or pooling.
struct Geom {
  int64_t n, h, w, c;  // input
  int64_t kh, kw, o;   // window (o: output channels; = c for pools)
  int64_t oh, ow;      // output
  int64_t sh, sw;
  int64_t pt, pb, pl, pr;
};

// `what` names the window in errors: "filter" or "pooling".
inline absl::StatusOr<Geom> MakeGeom(const TensorShape& in, int64_t kh, int64_t kw, int64_t o, const WindowAttrs& a,
                                     const char* what) {
  Geom g;
  g.n = in.dim_size(0);
  g.h = in.dim_size(1);
  g.w = in.dim_size(2);
  g.c = in.dim_size(3);
  g.kh = kh;
  g.kw = kw;
  g.o = o;
  g.sh = a.sh;
  g.sw = a.sw;
  ASSIGN_OR_RETURN(WindowDim dh, ComputeWindow(g.h, kh, a.sh, a.same, what));
  ASSIGN_OR_RETURN(WindowDim dw, ComputeWindow(g.w, kw, a.sw, a.same, what));
  g.oh = dh.out;
  g.ow = dw.out;
  g.pt = dh.pad_before;
  g.pb = dh.pad_after;
  g.pl = dw.pad_before;
  g.pr = dw.pad_after;
  return g;
}

// A shape given as a 4-element int32/int64 vector input (e.g. input_sizes).
inline absl::StatusOr<TensorShape> SizesInput(const Tensor& t, const char* what) {
  if (t.dims() != 1 || t.NumElements() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a vector of 4 elements, got a tensor of shape ", t.shape().DebugString()));
  }
  std::vector<int64_t> dims;
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) dims.push_back(v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) dims.push_back(v);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be int32 or int64"));
  }
  return TensorShape::FromDims(dims);
}

}  // namespace window_geometry
}  // namespace distflow

// Slicing ops (TensorFlow 1.x semantics): StridedSlice (numpy basic indexing:
// begin/end/strides with begin, end, ellipsis, new_axis and shrink_axis
// masks; the rules are graph/strided_slice.h), its gradient StridedSliceGrad,
// and Split / SplitV (equal parts, or parts of given sizes with one -1).
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/strided_slice.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

absl::Status StridedSliceShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(StridedSliceMasks masks, ReadStridedSliceMasks(c->node()));
  const PartialShape& in = c->input(0);
  std::vector<int64_t> strides;
  if (in.unknown_rank() || !c->ConstantInputAsInts(3, &strides)) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::optional<std::vector<int64_t>> begin(std::in_place), end(std::in_place);
  if (!c->ConstantInputAsInts(1, &*begin)) begin.reset();
  if (!c->ConstantInputAsInts(2, &*end)) end.reset();
  std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
  ASSIGN_OR_RETURN(StridedSliceDense d, ResolveStridedSlice(dims, begin, end, strides, masks));
  c->set_output(0, PartialShape(absl::MakeConstSpan(d.output_shape)));
  return absl::OkStatus();
}

// StridedSliceGrad's output has the shape its first input holds.
absl::Status ShapeFromFirstInput(InferenceContext* c) {
  std::vector<int64_t> dims;
  if (c->ConstantInputAsInts(0, &dims)) {
    c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
    return absl::OkStatus();
  }
  const PartialShape& s = c->input(0);
  const int64_t n = s.unknown_rank() || s.rank() != 1 ? kUnknown : s.dim(0);
  c->set_output(0, n >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(n)) : PartialShape::Unknown());
  return absl::OkStatus();
}

// Split(split_dim, value) and SplitV(value, size_splits, split_dim).
absl::Status SplitShape(InferenceContext* c, int value_index, int axis_index, bool sized) {
  const PartialShape& in = c->input(value_index);
  const int n = c->num_outputs();
  std::vector<int64_t> axis_v;
  if (in.unknown_rank() || !c->ConstantInputAsInts(axis_index, &axis_v) || axis_v.size() != 1) {
    const PartialShape out = in.unknown_rank() ? PartialShape::Unknown() : PartialShape::UnknownOfRank(in.rank());
    for (int i = 0; i < n; ++i) c->set_output(i, out);
    return absl::OkStatus();
  }
  const int64_t rank = in.rank();
  int64_t axis = axis_v[0];
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Split: axis ", axis, " is out of range [", -rank, ", ", rank, ") for shape ", in.DebugString()));
  }
  if (axis < 0) axis += rank;
  const int64_t dim = in.dim(static_cast<int>(axis));
  std::vector<int64_t> sizes(static_cast<size_t>(n), kUnknown);
  if (!sized) {
    if (dim >= 0 && dim % n != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Split: dimension ", axis, " of shape ", in.DebugString(),
                                                     " (size ", dim, ") is not divisible by num_split = ", n));
    }
    if (dim >= 0) sizes.assign(static_cast<size_t>(n), dim / n);
  } else {
    std::vector<int64_t> given;
    if (c->ConstantInputAsInts(1, &given)) {
      if (static_cast<int>(given.size()) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat("SplitV: size_splits has ", given.size(), " entries but num_split = ", n));
      }
      int64_t known = 0, unknown_at = -1;
      for (int i = 0; i < n; ++i) {
        if (given[static_cast<size_t>(i)] == -1 && unknown_at < 0) {
          unknown_at = i;
        } else if (given[static_cast<size_t>(i)] < 0) {
          return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits[", i,
                                                         "] = ", given[static_cast<size_t>(i)],
                                                         " (only one -1 is allowed, other sizes must be >= 0)"));
        } else {
          known += given[static_cast<size_t>(i)];
        }
      }
      if (dim >= 0 && (known > dim || (unknown_at < 0 && known != dim))) {
        return absl::InvalidArgumentError(absl::StrCat("SplitV: size_splits sum to ", known, " but dimension ", axis,
                                                       " of shape ", in.DebugString(), " has size ", dim));
      }
      sizes = given;
      if (unknown_at >= 0) sizes[static_cast<size_t>(unknown_at)] = dim >= 0 ? dim - known : kUnknown;
    }
  }
  std::vector<int64_t> out(in.dims().begin(), in.dims().end());
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(axis)] = sizes[static_cast<size_t>(i)];
    c->set_output(i, PartialShape(absl::MakeConstSpan(out)));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSliceOps(OpRegistry* r) {
  constexpr const char* kMasks[] = {"begin_mask: int = 0", "end_mask: int = 0", "ellipsis_mask: int = 0",
                                    "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"};
  OpDefBuilder slice("StridedSlice");
  slice.Input("input: T").Input("begin: Index").Input("end: Index").Input("strides: Index").Output("output: T");
  slice.Attr("T: type").Attr("Index: {int32, int64} = int32");
  OpDefBuilder grad("StridedSliceGrad");
  grad.Input("shape: Index").Input("begin: Index").Input("end: Index").Input("strides: Index").Input("dy: T");
  grad.Output("output: T").Attr("T: type").Attr("Index: {int32, int64} = int32");
  for (const char* m : kMasks) {
    slice.Attr(m);
    grad.Attr(m);
  }
  r->MustRegister(slice.SetShapeFn(StridedSliceShape));
  r->MustRegister(grad.SetShapeFn(ShapeFromFirstInput));

  r->MustRegister(OpDefBuilder("Split")
                      .Input("split_dim: int32")
                      .Input("value: T")
                      .Output("output: num_split * T")
                      .Attr("num_split: int >= 1")
                      .Attr("T: type")
                      .SetShapeFn([](InferenceContext* c) { return SplitShape(c, 1, 0, false); }));
  r->MustRegister(OpDefBuilder("SplitV")
                      .Input("value: T")
                      .Input("size_splits: Tlen")
                      .Input("split_dim: int32")
                      .Output("output: num_split * T")
                      .Attr("num_split: int >= 1")
                      .Attr("T: type")
                      .Attr("Tlen: {int32, int64} = int64")
                      .SetShapeFn([](InferenceContext* c) { return SplitShape(c, 0, 2, true); }));
}

}  // namespace distflow

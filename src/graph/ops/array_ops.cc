// Array ops: Reshape, Shape, Size, Rank, Fill, ZerosLike, OnesLike, Concat,
// Slice, Pack, Unpack, Transpose, Tile, Range, OneHot (TensorFlow 1.x
// semantics; Concat takes its axis last, like TF's ConcatV2).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/shape_rules.h"

namespace distflow {
namespace {

constexpr int64_t kUnknown = PartialShape::kUnknownDim;

std::string DimsString(const std::vector<int64_t>& d) { return absl::StrCat("[", absl::StrJoin(d, ","), "]"); }

// The number of elements of a rank-1 shape-like input, or -1.
int64_t VectorLength(const PartialShape& s) {
  if (s.unknown_rank()) return kUnknown;
  if (s.rank() == 0) return 1;
  if (s.rank() == 1) return s.dim(0);
  return kUnknown;
}

absl::Status ReshapeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> dims;
  if (!c->ConstantInputAsInts(1, &dims)) {
    ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(1), 1, "Reshape's shape"));
    int64_t n = s.dim(0);
    c->set_output(0, n >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(n)) : PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (c->input(1).rank() > 1) return absl::InvalidArgumentError("shape must be a vector");
  ASSIGN_OR_RETURN(std::vector<int64_t> resolved, ResolveReshape(std::move(dims), in.num_elements(), in.DebugString()));
  dims = std::move(resolved);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ShapeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  c->set_output(0, PartialShape({in.unknown_rank() ? kUnknown : in.rank()}));
  return absl::OkStatus();
}

absl::Status FillShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, "Fill's value").status());
  std::vector<int64_t> dims;
  if (c->ConstantInputAsInts(0, &dims)) {
    if (c->input(0).rank() != 1) return absl::InvalidArgumentError("dims must be a vector");
    for (int64_t d : dims) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("dims must be non-negative, got ", DimsString(dims)));
    }
    c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(c->input(0), 1, "Fill's dims"));
  c->set_output(0, s.dim(0) >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(s.dim(0))) : PartialShape::Unknown());
  return absl::OkStatus();
}

// Concat (axis last) and Pack share this: the inputs are the first N inputs.
absl::Status ConcatShape(InferenceContext* c) {
  int n = c->num_inputs() - 1;
  int rank = -1;
  for (int i = 0; i < n; ++i) {
    if (c->input(i).unknown_rank()) continue;
    if (rank >= 0 && c->input(i).rank() != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("ConcatOp: Ranks of all input tensors should match: shape[0] = ", c->input(0).DebugString(),
                       " vs. shape[", i, "] = ", c->input(i).DebugString()));
    }
    rank = c->input(i).rank();
  }
  std::vector<int64_t> axis_v;
  if (!c->ConstantInputAsInts(n, &axis_v) || rank < 0) {
    c->set_output(0, rank >= 0 ? PartialShape::UnknownOfRank(rank) : PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (axis_v.size() != 1) return absl::InvalidArgumentError("axis must be a scalar");
  if (rank == 0) return absl::InvalidArgumentError("Can't concatenate scalars (use tf.stack instead)");
  int64_t axis = axis_v[0];
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("ConcatOp : Expected concatenating dimensions in the range [", -rank,
                                                   ", ", rank, "), but got ", axis));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> out(static_cast<size_t>(rank), kUnknown);
  int64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c->input(i);
    if (s.unknown_rank()) {
      sum = kUnknown;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      int64_t a = out[static_cast<size_t>(d)], b = s.dim(d);
      if (a >= 0 && b >= 0 && a != b) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ConcatOp : Dimension ", d, " in both shapes must be equal: shape[0] = ", c->input(0).DebugString(),
            " vs. shape[", i, "] = ", s.DebugString()));
      }
      if (a < 0) out[static_cast<size_t>(d)] = b;
    }
    if (sum >= 0) sum = s.dim(static_cast<int>(axis)) >= 0 ? sum + s.dim(static_cast<int>(axis)) : kUnknown;
  }
  out[static_cast<size_t>(axis)] = sum;
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status SliceShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> begin, size;
  bool have_begin = c->ConstantInputAsInts(1, &begin);
  bool have_size = c->ConstantInputAsInts(2, &size);
  int64_t n = VectorLength(c->input(1));
  if (n < 0) n = VectorLength(c->input(2));
  if (have_begin) n = static_cast<int64_t>(begin.size());
  if (have_size) {
    if (n >= 0 && static_cast<int64_t>(size.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("Expected size and begin to have the same length, got begin ",
                                                     DimsString(begin), " and size ", DimsString(size)));
    }
    n = static_cast<int64_t>(size.size());
  }
  if (!in.unknown_rank() && n >= 0 && in.rank() != n) {
    return absl::InvalidArgumentError(absl::StrCat("Expected begin and size arguments to be vectors of length ",
                                                   in.rank(), " for input of shape ", in.DebugString(),
                                                   ", but they have length ", n));
  }
  if (n < 0) n = in.rank();
  if (n < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> out(static_cast<size_t>(n), kUnknown);
  for (int64_t i = 0; i < n; ++i) {
    size_t k = static_cast<size_t>(i);
    int64_t dim = in.unknown_rank() ? kUnknown : in.dim(static_cast<int>(i));
    int64_t b = have_begin ? begin[k] : kUnknown;
    if (have_begin && (b < 0 || (dim >= 0 && b > dim))) {
      return absl::InvalidArgumentError(
          absl::StrCat("Expected begin[", i, "] in [0, ", dim >= 0 ? absl::StrCat(dim) : "?", "], but got ", b));
    }
    if (!have_size) continue;
    int64_t s = size[k];
    if (s == -1) {
      if (dim >= 0 && b >= 0) out[k] = dim - b;
    } else if (s < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Expected size[", i, "] >= -1, but got ", s));
    } else {
      if (dim >= 0 && b >= 0 && b + s > dim) {
        return absl::InvalidArgumentError(absl::StrCat("Expected size[", i, "] in [0, ", dim - b, "], but got ", s));
      }
      out[k] = s;
    }
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status PackShape(InferenceContext* c) {
  PartialShape s = PartialShape::Unknown();
  for (int i = 0; i < c->num_inputs(); ++i) {
    absl::StatusOr<PartialShape> m = s.Merge(c->input(i));
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Shapes of all inputs must match: values[0].shape = ", c->input(0).DebugString(), " != values[",
                       i, "].shape = ", c->input(i).DebugString()));
    }
    s = *m;
  }
  ASSIGN_OR_RETURN(int64_t axis, GetAttrInt(c->node(), "axis"));
  if (s.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int64_t r = s.rank() + 1;
  int64_t a = axis;
  if (a < -r || a >= r) {
    return absl::InvalidArgumentError(absl::StrCat("axis = ", a, " not in [", -r, ", ", r, ")"));
  }
  if (a < 0) a += r;
  std::vector<int64_t> out(s.dims().begin(), s.dims().end());
  out.insert(out.begin() + a, c->num_inputs());
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status UnpackShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(int64_t axis, GetAttrInt(c->node(), "axis"));
  PartialShape out = PartialShape::Unknown();
  if (!in.unknown_rank()) {
    int64_t r = in.rank();
    int64_t a = axis;
    if (a < -r || a >= r) {
      return absl::InvalidArgumentError(absl::StrCat("axis = ", a, " not in [", -r, ", ", r, ")"));
    }
    if (a < 0) a += r;
    int64_t d = in.dim(static_cast<int>(a));
    if (d >= 0 && d != c->num_outputs()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Dimension ", a, " of input shape ", in.DebugString(), " must equal num = ", c->num_outputs()));
    }
    std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
    dims.erase(dims.begin() + a);
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, out);
  return absl::OkStatus();
}

absl::Status TransposeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> perm;
  if (!c->ConstantInputAsInts(1, &perm)) {
    int64_t n = in.rank() >= 0 ? in.rank() : VectorLength(c->input(1));
    c->set_output(0, n >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(n)) : PartialShape::Unknown());
    return absl::OkStatus();
  }
  int64_t n = static_cast<int64_t>(perm.size());
  if (!in.unknown_rank() && in.rank() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("transpose expects a vector of size ", in.rank(), ". But input(1) is a vector of size ", n));
  }
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> out(perm.size(), kUnknown);
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = perm[static_cast<size_t>(i)];
    if (p < 0 || p >= n) return absl::InvalidArgumentError(absl::StrCat(p, " is out of range [0 .. ", n, ")"));
    if (seen[static_cast<size_t>(p)]) {
      return absl::InvalidArgumentError(absl::StrCat(p, " is duplicated in the permutation ", DimsString(perm)));
    }
    seen[static_cast<size_t>(p)] = true;
    if (!in.unknown_rank()) out[static_cast<size_t>(i)] = in.dim(static_cast<int>(p));
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status TileShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> m;
  if (!c->ConstantInputAsInts(1, &m)) {
    int64_t n = in.rank() >= 0 ? in.rank() : VectorLength(c->input(1));
    c->set_output(0, n >= 0 ? PartialShape::UnknownOfRank(static_cast<int>(n)) : PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (c->input(1).rank() != 1) return absl::InvalidArgumentError("Expected multiples argument to be a vector");
  if (!in.unknown_rank() && static_cast<int64_t>(m.size()) != in.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected multiples argument to be a vector of length ", in.rank(), " but got length ", m.size()));
  }
  std::vector<int64_t> out(m.size(), kUnknown);
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Expected multiples[", i, "] >= 0, but got ", m[i]));
    }
    int64_t d = in.unknown_rank() ? kUnknown : in.dim(static_cast<int>(i));
    if (d >= 0 && !MultiplyWithoutOverflow(d, m[i], &out[i])) {
      return absl::InvalidArgumentError("Tile output has too many elements");
    }
    if (m[i] == 0) out[i] = 0;
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

absl::Status RangeShape(InferenceContext* c) {
  for (int i = 0; i < 3; ++i) {
    RETURN_IF_ERROR(c->WithRank(c->input(i), 0, i == 0 ? "start" : i == 1 ? "limit" : "delta").status());
  }
  const Tensor* ts[3] = {c->input_tensor(0), c->input_tensor(1), c->input_tensor(2)};
  if (ts[0] == nullptr || ts[1] == nullptr || ts[2] == nullptr) {
    c->set_output(0, PartialShape({kUnknown}));
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> n = absl::InvalidArgumentError("Range: unsupported type");
  switch (ts[0]->dtype()) {
    case DT_INT32:
      n = RangeSize(ts[0]->scalar<int32_t>(), ts[1]->scalar<int32_t>(), ts[2]->scalar<int32_t>());
      break;
    case DT_INT64:
      n = RangeSize(ts[0]->scalar<int64_t>(), ts[1]->scalar<int64_t>(), ts[2]->scalar<int64_t>());
      break;
    case DT_FLOAT:
      n = RangeSize(ts[0]->scalar<float>(), ts[1]->scalar<float>(), ts[2]->scalar<float>());
      break;
    case DT_DOUBLE:
      n = RangeSize(ts[0]->scalar<double>(), ts[1]->scalar<double>(), ts[2]->scalar<double>());
      break;
    default:
      break;
  }
  RETURN_IF_ERROR(n.status());
  c->set_output(0, PartialShape({*n}));
  return absl::OkStatus();
}

absl::Status OneHotShape(InferenceContext* c) {
  for (int i = 1; i < 4; ++i) {
    RETURN_IF_ERROR(c->WithRank(c->input(i), 0, i == 1 ? "depth" : i == 2 ? "on_value" : "off_value").status());
  }
  ASSIGN_OR_RETURN(int64_t axis, GetAttrInt(c->node(), "axis"));
  if (axis < -1)
    return absl::InvalidArgumentError(absl::StrCat("Expected axis to be -1 or between [0, rank], got ", axis));
  int64_t depth = kUnknown;
  std::vector<int64_t> d;
  if (c->ConstantInputAsInts(1, &d) && d.size() == 1) {
    if (d[0] < 0) return absl::InvalidArgumentError(absl::StrCat("depth must be non-negative, got: ", d[0]));
    depth = d[0];
  }
  const PartialShape& in = c->input(0);
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (axis > in.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected axis to be -1 or between [0, ", in.rank(), "], got ", axis));
  }
  int64_t a = axis == -1 ? in.rank() : axis;
  std::vector<int64_t> out(in.dims().begin(), in.dims().end());
  out.insert(out.begin() + a, depth);
  c->set_output(0, PartialShape(absl::MakeConstSpan(out)));
  return absl::OkStatus();
}

}  // namespace

void RegisterArrayOps(OpRegistry* r) {
  r->MustRegister(OpDefBuilder("Reshape")
                      .Input("tensor: T")
                      .Input("shape: Tshape")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Tshape: {int32, int64} = int32")
                      .SetShapeFn(ReshapeShape));
  r->MustRegister(OpDefBuilder("Shape")
                      .Input("input: T")
                      .Output("output: out_type")
                      .Attr("T: type")
                      .Attr("out_type: {int32, int64} = int32")
                      .SetShapeFn(ShapeShape));
  r->MustRegister(OpDefBuilder("Size")
                      .Input("input: T")
                      .Output("output: out_type")
                      .Attr("T: type")
                      .Attr("out_type: {int32, int64} = int32")
                      .SetShapeFn(ScalarShape));
  r->MustRegister(
      OpDefBuilder("Rank").Input("input: T").Output("output: int32").Attr("T: type").SetShapeFn(ScalarShape));
  r->MustRegister(OpDefBuilder("Fill")
                      .Input("dims: index_type")
                      .Input("value: T")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("index_type: {int32, int64} = int32")
                      .SetShapeFn(FillShape));
  for (const char* op : {"ZerosLike", "OnesLike"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("x: T")
                        .Output("y: T")
                        .Attr("T: {float, double, int32, int64, uint8, bool}")
                        .SetShapeFn(UnchangedShape));
  }
  r->MustRegister(OpDefBuilder("Concat")
                      .Input("values: N * T")
                      .Input("axis: Tidx")
                      .Output("output: T")
                      .Attr("N: int >= 1")
                      .Attr("T: type")
                      .Attr("Tidx: {int32, int64} = int32")
                      .SetShapeFn(ConcatShape));
  r->MustRegister(OpDefBuilder("Slice")
                      .Input("input: T")
                      .Input("begin: Index")
                      .Input("size: Index")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Index: {int32, int64} = int32")
                      .SetShapeFn(SliceShape));
  r->MustRegister(OpDefBuilder("Pack")
                      .Input("values: N * T")
                      .Output("output: T")
                      .Attr("N: int >= 1")
                      .Attr("T: type")
                      .Attr("axis: int = 0")
                      .SetShapeFn(PackShape));
  r->MustRegister(OpDefBuilder("Unpack")
                      .Input("value: T")
                      .Output("output: num * T")
                      .Attr("num: int >= 0")
                      .Attr("T: type")
                      .Attr("axis: int = 0")
                      .SetShapeFn(UnpackShape));
  r->MustRegister(OpDefBuilder("Transpose")
                      .Input("x: T")
                      .Input("perm: Tperm")
                      .Output("y: T")
                      .Attr("T: type")
                      .Attr("Tperm: {int32, int64} = int32")
                      .SetShapeFn(TransposeShape));
  r->MustRegister(OpDefBuilder("Tile")
                      .Input("input: T")
                      .Input("multiples: Tmultiples")
                      .Output("output: T")
                      .Attr("T: type")
                      .Attr("Tmultiples: {int32, int64} = int32")
                      .SetShapeFn(TileShape));
  r->MustRegister(OpDefBuilder("Range")
                      .Input("start: Tidx")
                      .Input("limit: Tidx")
                      .Input("delta: Tidx")
                      .Output("output: Tidx")
                      .Attr("Tidx: {int32, int64, float, double} = int32")
                      .SetShapeFn(RangeShape));
  r->MustRegister(OpDefBuilder("OneHot")
                      .Input("indices: TI")
                      .Input("depth: int32")
                      .Input("on_value: T")
                      .Input("off_value: T")
                      .Output("output: T")
                      .Attr("axis: int = -1")
                      .Attr("T: type")
                      .Attr("TI: {uint8, int32, int64} = int64")
                      .SetShapeFn(OneHotShape));
}

}  // namespace distflow

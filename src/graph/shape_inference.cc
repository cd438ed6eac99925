#include "graph/shape_inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace distflow {

InferenceContext::InferenceContext(const proto::NodeDef& node, std::vector<PartialShape> input_shapes,
                                   std::vector<DataType> input_types, std::vector<const Tensor*> input_tensors,
                                   int num_outputs)
    : node_(node),
      inputs_(std::move(input_shapes)),
      input_types_(std::move(input_types)),
      input_tensors_(std::move(input_tensors)),
      outputs_(static_cast<size_t>(num_outputs)) {}

absl::StatusOr<PartialShape> InferenceContext::WithRank(const PartialShape& s, int rank, absl::string_view what) const {
  if (s.unknown_rank()) return PartialShape::UnknownOfRank(rank);
  if (s.rank() != rank) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must have rank ", rank, " but has shape ", s.DebugString()));
  }
  return s;
}

absl::StatusOr<PartialShape> InferenceContext::WithRankAtLeast(const PartialShape& s, int rank,
                                                               absl::string_view what) const {
  if (!s.unknown_rank() && s.rank() < rank) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must have rank at least ", rank, " but has shape ", s.DebugString()));
  }
  return s;
}

absl::StatusOr<int64_t> InferenceContext::MergeDim(int64_t a, int64_t b, absl::string_view what) const {
  if (a < 0) return b;
  if (b < 0 || a == b) return a;
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", a, " vs ", b));
}

bool InferenceContext::ConstantInputAsInts(int i, std::vector<int64_t>* out) const {
  const Tensor* t = input_tensor(i);
  if (t == nullptr) return false;
  out->clear();
  if (t->dtype() == DT_INT32) {
    for (int32_t v : t->flat<int32_t>()) out->push_back(v);
  } else if (t->dtype() == DT_INT64) {
    for (int64_t v : t->flat<int64_t>()) out->push_back(v);
  } else {
    return false;
  }
  return true;
}

absl::Status UnknownShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status ScalarShape(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

absl::Status UnchangedShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b) {
  if (a.unknown_rank() || b.unknown_rank()) return PartialShape::Unknown();
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a.dim(ia) : 1;
    int64_t db = ib >= 0 ? b.dim(ib) : 1;
    int64_t d;
    if (da == 1) {
      d = db;
    } else if (db == 1) {
      d = da;
    } else if (da < 0 || db < 0) {
      d = std::max(da, db);  // the known one, if any; a mismatch shows at run time
    } else if (da == db) {
      d = da;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("Incompatible shapes for broadcasting: ", a.DebugString(), " and ", b.DebugString()));
    }
    out[static_cast<size_t>(i)] = d;
  }
  return PartialShape(out);
}

absl::Status BroadcastBinaryShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, BroadcastShapes(c->input(0), c->input(1)));
  c->set_output(0, s);
  return absl::OkStatus();
}

absl::Status MergeAllInputsShape(InferenceContext* c) {
  PartialShape s = PartialShape::Unknown();
  for (int i = 0; i < c->num_inputs(); ++i) {
    absl::StatusOr<PartialShape> m = s.Merge(c->input(i));
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input ", i, " has shape ", c->input(i).DebugString(), ", incompatible with ", s.DebugString()));
    }
    s = *m;
  }
  c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace distflow

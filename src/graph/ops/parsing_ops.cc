// Parsing of serialized records: DecodeRaw (bytes as numbers) and
// ParseExample (tf.train.Example protos, proto/example.proto, into dense
// tensors and sparse components). Kernels: kernels/cpu/parsing_kernels.cc.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/shape_rules.h"

namespace distflow {
namespace {

absl::Status ParseExampleShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape batch, c->WithRank(c->input(0), 1, "serialized"));
  ASSIGN_OR_RETURN(std::vector<std::string> sparse_keys, GetAttrStringList(c->node(), "sparse_keys"));
  ASSIGN_OR_RETURN(std::vector<std::string> dense_keys, GetAttrStringList(c->node(), "dense_keys"));
  ASSIGN_OR_RETURN(std::vector<int64_t> flat, GetAttrIntList(c->node(), "dense_shapes"));
  ASSIGN_OR_RETURN(std::vector<PartialShape> shapes, DecodeShapeList(flat, "attribute 'dense_shapes'"));
  if (shapes.size() != dense_keys.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense_shapes holds ", shapes.size(), " shapes for ", dense_keys.size(), " dense keys"));
  }
  const int ns = static_cast<int>(sparse_keys.size());
  for (int i = 0; i < ns; ++i) {
    c->set_output(i, PartialShape({-1, 2}));
    c->set_output(ns + i, PartialShape({-1}));
    c->set_output(2 * ns + i, PartialShape({2}));
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i].IsFullyDefined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense key '", dense_keys[i], "' needs a fully defined shape, got ", shapes[i].DebugString()));
    }
    PartialShape out({batch.dim(0)});
    for (int64_t d : shapes[i].dims()) out.AppendDim(d);
    c->set_output(3 * ns + static_cast<int>(i), out);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterParsingOps(OpRegistry* r) {
  // Each string's bytes as numbers of out_type (its length must be a
  // multiple of their size): output shape = input shape + [length / size].
  r->MustRegister(OpDefBuilder("DecodeRaw")
                      .Input("bytes: string")
                      .Output("output: out_type")
                      .Attr("out_type: {float, double, int32, int64, uint8}")
                      .Attr("little_endian: bool = true")
                      .SetShapeFn([](InferenceContext* c) {
                        PartialShape s = c->input(0);
                        if (!s.unknown_rank()) s.AppendDim(-1);
                        c->set_output(0, s);
                        return absl::OkStatus();
                      }));
  // A batch of serialized tf.train.Example protos. Each sparse key gives
  // indices [N, 2] (example, position), values [N] and dense_shape [2];
  // each dense key a [batch, ...dense_shape] tensor, its default used where
  // an example lacks the key (an empty default: the key is required).
  r->MustRegister(OpDefBuilder("ParseExample")
                      .Input("serialized: string")
                      .Input("dense_defaults: Tdense")
                      .Output("sparse_indices: Nsparse * int64")
                      .Output("sparse_values: sparse_types")
                      .Output("sparse_shapes: Nsparse * int64")
                      .Output("dense_values: Tdense")
                      .Attr("Nsparse: int >= 0")
                      .Attr("sparse_keys: list(string)")
                      .Attr("dense_keys: list(string)")
                      .Attr("sparse_types: list(type)")
                      .Attr("Tdense: list(type)")
                      .Attr("dense_shapes: list(int)")
                      .SetShapeFn(ParseExampleShape));
}

}  // namespace distflow

// Summary ops: each outputs a scalar string, a serialized Summary
// (proto/summary.proto) that a FileWriter puts in an event file. The values
// are computed in the graph, so a summary of a tensor on a ps task is built
// there and only its bytes cross the network.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

// A string input that must be one tag.
absl::Status ScalarTag(InferenceContext* c, int i, absl::string_view what) {
  const PartialShape& s = c->input(i);
  if (!s.unknown_rank() && s.rank() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", what, "' must be a scalar string, got shape ", s.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status ScalarSummaryShape(InferenceContext* c) {
  const PartialShape& tags = c->input(0);
  const PartialShape& values = c->input(1);
  if (!tags.IsCompatibleWith(values)) {
    return absl::InvalidArgumentError(absl::StrCat("tags and values must have the same shape, got tags ",
                                                   tags.DebugString(), " and values ", values.DebugString(),
                                                   " (tf.summary.scalar takes one scalar value)"));
  }
  return ScalarShape(c);
}

absl::Status ImageSummaryShape(InferenceContext* c) {
  RETURN_IF_ERROR(ScalarTag(c, 0, "tag"));
  const PartialShape& t = c->input(1);
  if (!t.unknown_rank()) {
    if (t.rank() != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("images must be 4-D [batch_size, height, width, channels], got shape ", t.DebugString()));
    }
    int64_t channels = t.dim(3);
    if (channels != -1 && channels != 1 && channels != 3 && channels != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("images must have 1, 3 or 4 channels, got ", channels, " (shape ", t.DebugString(), ")"));
    }
  }
  return ScalarShape(c);
}

}  // namespace

void RegisterSummaryOps(OpRegistry* r) {
  // One simple_value per element of `values`, tagged by the same element
  // of `tags` (same shape; usually both scalars).
  r->MustRegister(OpDefBuilder("ScalarSummary")
                      .Input("tags: string")
                      .Input("values: T")
                      .Output("summary: string")
                      .Attr("T: {float, double, int32, int64, uint8}")
                      .SetShapeFn(ScalarSummaryShape));
  // A histogram of every element of `values`, with TensorFlow's default
  // buckets (exponential, ratio 1.1, from 1e-12 to 1e20 on each side of 0);
  // runs of empty buckets are collapsed into one. NaN or Inf is an error.
  r->MustRegister(OpDefBuilder("HistogramSummary")
                      .Input("tag: string")
                      .Input("values: T")
                      .Output("summary: string")
                      .Attr("T: {float, double, int32, int64, uint8}")
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(ScalarTag(c, 0, "tag"));
                        return ScalarShape(c);
                      }));
  // Up to max_images PNG images from a [batch, height, width, channels]
  // tensor (1, 3 or 4 channels). uint8 is written as is; floats are scaled
  // per image: into [0, 255] when none is negative (by 255 / max), else
  // around 128 (by 127 / max |value|). Non-finite pixels get bad_color
  // ([] = opaque red). Tags "tag/image" or, for max_images > 1, "tag/image/i".
  r->MustRegister(OpDefBuilder("ImageSummary")
                      .Input("tag: string")
                      .Input("tensor: T")
                      .Output("summary: string")
                      .Attr("max_images: int = 3")
                      .Attr("T: {uint8, float, double} = float")
                      .Attr("bad_color: list(int) = []")
                      .SetShapeFn(ImageSummaryShape));
  // The tensor itself, with plugin metadata (a serialized SummaryMetadata,
  // e.g. plugin "text" for tf.summary.text).
  r->MustRegister(OpDefBuilder("TensorSummaryV2")
                      .Input("tag: string")
                      .Input("tensor: T")
                      .Input("serialized_summary_metadata: string")
                      .Output("summary: string")
                      .Attr("T: {float, double, int32, int64, uint8, bool, string}")
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(ScalarTag(c, 0, "tag"));
                        RETURN_IF_ERROR(ScalarTag(c, 2, "serialized_summary_metadata"));
                        return ScalarShape(c);
                      }));
  // The values of all `inputs` (serialized Summaries, each a scalar or a
  // vector of them) in one Summary; a tag seen twice is an error.
  r->MustRegister(OpDefBuilder("MergeSummary")
                      .Input("inputs: N * string")
                      .Output("summary: string")
                      .Attr("N: int >= 1")
                      .SetShapeFn(ScalarShape));
}

}  // namespace distflow

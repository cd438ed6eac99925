// tf.data ops (kernels in kernels/data/). A dataset op makes a dataset on
// the task that runs it and outputs only its key, a string scalar; the
// elements stay on that task. Iterator ops walk a dataset: Iterator names an
// iterator resource, MakeIterator (re)starts it on a dataset, OneShotIterator
// starts one the first time it runs, and IteratorGetNext yields the next
// element's components, or OutOfRange at the end.
//
// Element shapes travel as `output_shapes`, a list(int) encoding each
// component's partial shape as its rank (-1: unknown) followed by its
// dimensions (-1: unknown); IteratorGetNext's outputs take those shapes.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status HandleShape(InferenceContext* c) {
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

// Every input a scalar (a dataset key or a count), then a scalar handle.
absl::Status ScalarInputsHandle(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    if (c->input(i).rank() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " must be a scalar, got ", c->input(i).DebugString()));
    }
  }
  return HandleShape(c);
}

absl::Status DecodeShapes(InferenceContext* c, size_t n) {
  absl::StatusOr<std::vector<int64_t>> code = GetAttrIntList(c->node(), "output_shapes");
  if (!code.ok() || code->empty()) return UnknownShape(c);
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    if (pos >= code->size()) return absl::InvalidArgumentError("output_shapes encodes fewer shapes than output_types");
    const int64_t rank = (*code)[pos++];
    if (rank < 0) {
      c->set_output(static_cast<int>(i), PartialShape::Unknown());
      continue;
    }
    if (pos + static_cast<size_t>(rank) > code->size()) return absl::InvalidArgumentError("output_shapes is truncated");
    c->set_output(static_cast<int>(i),
                  PartialShape(absl::Span<const int64_t>(code->data() + pos, static_cast<size_t>(rank))));
    pos += static_cast<size_t>(rank);
  }
  if (pos != code->size()) return absl::InvalidArgumentError("output_shapes encodes more shapes than output_types");
  return absl::OkStatus();
}

absl::Status SlicesShape(InferenceContext* c) {
  int64_t rows = -1;
  for (int i = 0; i < c->num_inputs(); ++i) {
    const PartialShape& s = c->input(i);
    if (s.rank() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("component ", i, " is a scalar: it has no rows to slice"));
    }
    if (s.rank() < 0 || s.dim(0) < 0) continue;
    if (rows >= 0 && s.dim(0) != rows) {
      return absl::InvalidArgumentError(absl::StrCat("components have different numbers of rows: component 0..", i - 1,
                                                     " have ", rows, ", component ", i, " has ", s.dim(0), " (shape ",
                                                     s.DebugString(), ")"));
    }
    rows = s.dim(0);
  }
  return HandleShape(c);
}

}  // namespace

void RegisterDatasetOps(OpRegistry* r) {
  // Sources.
  r->MustRegister(OpDefBuilder("TensorDataset")  // one element: the components
                      .Input("components: Toutput_types")
                      .Output("handle: string")
                      .Attr("Toutput_types: list(type)")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));
  r->MustRegister(OpDefBuilder("TensorSliceDataset")  // one element per row of the components
                      .Input("components: Toutput_types")
                      .Output("handle: string")
                      .Attr("Toutput_types: list(type)")
                      .SetIsStateful()
                      .SetShapeFn(SlicesShape));
  r->MustRegister(OpDefBuilder("RangeDataset")
                      .Input("start: int64")
                      .Input("stop: int64")
                      .Input("step: int64")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // One string element per line of each file (without the line ending).
  r->MustRegister(OpDefBuilder("TextLineDataset")
                      .Input("filenames: string")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));
  // One string element per record of `record_bytes` after `header_bytes`,
  // up to `footer_bytes` before the end of each file.
  r->MustRegister(OpDefBuilder("FixedLengthRecordDataset")
                      .Input("filenames: string")
                      .Input("header_bytes: int64")
                      .Input("record_bytes: int64")
                      .Input("footer_bytes: int64")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));

  // One string element per record of each TFRecord file; compression_type
  // "", "ZLIB" or "GZIP". A damaged record is DataLoss naming the file and
  // the record's offset.
  r->MustRegister(OpDefBuilder("TFRecordDataset")
                      .Input("filenames: string")
                      .Input("compression_type: string")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));

  // Transformations; input 0 is the dataset transformed.
  // The function `f` (a serialized FunctionDef; proto/function.proto)
  // applied to each element, on up to `num_parallel_calls` elements at once
  // (the order is kept).
  r->MustRegister(OpDefBuilder("MapDataset")
                      .Input("input_dataset: string")
                      .Input("num_parallel_calls: int64")
                      .Output("handle: string")
                      .Attr("f: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // The elements for which the function `f` (giving one bool) is true.
  r->MustRegister(OpDefBuilder("FilterDataset")
                      .Input("input_dataset: string")
                      .Output("handle: string")
                      .Attr("f: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // The concatenation of the datasets the function `f` makes from each
  // element (it gives one dataset key); their components are `output_types`.
  r->MustRegister(OpDefBuilder("FlatMapDataset")
                      .Input("input_dataset: string")
                      .Output("handle: string")
                      .Attr("f: string")
                      .Attr("output_types: list(type)")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // Like FlatMapDataset, with `cycle_length` of the inner datasets read at
  // once, `block_length` elements from each in turn (Dataset.interleave).
  r->MustRegister(OpDefBuilder("InterleaveDataset")
                      .Input("input_dataset: string")
                      .Input("cycle_length: int64")
                      .Input("block_length: int64")
                      .Output("handle: string")
                      .Attr("f: string")
                      .Attr("output_types: list(type)")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  r->MustRegister(OpDefBuilder("BatchDataset")
                      .Input("input_dataset: string")
                      .Input("batch_size: int64")
                      .Input("drop_remainder: bool")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // Pads each component to `padded_shapes[i]` (-1: the batch's largest)
  // with `padding_values[i]`.
  r->MustRegister(OpDefBuilder("PaddedBatchDataset")
                      .Input("input_dataset: string")
                      .Input("batch_size: int64")
                      .Input("padded_shapes: N * int64")
                      .Input("padding_values: Toutput_types")
                      .Input("drop_remainder: bool")
                      .Output("handle: string")
                      .Attr("N: int >= 1")
                      .Attr("Toutput_types: list(type)")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));
  for (const char* op : {"RepeatDataset", "TakeDataset", "SkipDataset"}) {  // count -1: forever / all
    r->MustRegister(OpDefBuilder(op)
                        .Input("input_dataset: string")
                        .Input("count: int64")
                        .Output("handle: string")
                        .SetIsStateful()
                        .SetShapeFn(ScalarInputsHandle));
  }
  r->MustRegister(OpDefBuilder("ShardDataset")
                      .Input("input_dataset: string")
                      .Input("num_shards: int64")
                      .Input("index: int64")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // seed = seed2 = 0: a random seed. With reshuffle_each_iteration each
  // pass (each repeat) has another order.
  r->MustRegister(OpDefBuilder("ShuffleDataset")
                      .Input("input_dataset: string")
                      .Input("buffer_size: int64")
                      .Input("seed: int64")
                      .Input("seed2: int64")
                      .Output("handle: string")
                      .Attr("reshuffle_each_iteration: bool = true")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // A background thread keeps up to `buffer_size` elements ready (-1: 2).
  r->MustRegister(OpDefBuilder("PrefetchDataset")
                      .Input("input_dataset: string")
                      .Input("buffer_size: int64")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  // The first complete pass is kept in memory and replayed (`filename` must
  // be empty: caching to files is not supported).
  r->MustRegister(OpDefBuilder("CacheDataset")
                      .Input("input_dataset: string")
                      .Input("filename: string")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  r->MustRegister(OpDefBuilder("ZipDataset")
                      .Input("input_datasets: N * string")
                      .Output("handle: string")
                      .Attr("N: int >= 1")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));
  r->MustRegister(OpDefBuilder("ConcatenateDataset")
                      .Input("input_dataset: string")
                      .Input("another_dataset: string")
                      .Output("handle: string")
                      .SetIsStateful()
                      .SetShapeFn(ScalarInputsHandle));

  // Iterators: a resource of the task named `shared_name` (empty: the node's name).
  r->MustRegister(OpDefBuilder("Iterator")
                      .Output("handle: string")
                      .Attr("shared_name: string = ''")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));
  r->MustRegister(OpDefBuilder("MakeIterator")
                      .Input("dataset: string")
                      .Input("iterator: string")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return absl::OkStatus(); }));
  r->MustRegister(OpDefBuilder("OneShotIterator")
                      .Input("dataset: string")
                      .Output("handle: string")
                      .Attr("shared_name: string = ''")
                      .SetIsStateful()
                      .SetShapeFn(HandleShape));
  r->MustRegister(
      OpDefBuilder("IteratorGetNext")
          .Input("iterator: string")
          .Output("components: output_types")
          .Attr("output_types: list(type)")
          .Attr("output_shapes: list(int) = []")
          .SetIsStateful()
          .SetShapeFn([](InferenceContext* c) { return DecodeShapes(c, static_cast<size_t>(c->num_outputs())); }));
}

}  // namespace distflow

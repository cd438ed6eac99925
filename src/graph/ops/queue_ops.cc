// Queues and readers: TensorFlow 1's input pipeline before tf.data
// (kernels/cpu/queue.h, kernels/cpu/reader_kernels.cc).
//
// A queue or reader op outputs a handle (Ref(string): [container, name])
// to a resource of its task, created on first run; the ops that use it take
// the handle by reference, so the placer puts them on the queue's device, as
// TensorFlow colocates them. Element shapes travel as `shapes`, a list(int)
// of rank-prefixed shapes (graph/shape_rules.h: DecodeShapeList); dequeue
// ops carry the queue's shapes too, for shape inference.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"
#include "graph/shape_rules.h"

namespace distflow {
namespace {

absl::Status HandleShape(InferenceContext* c) {
  c->set_output(0, PartialShape({2}));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PartialShape>> ComponentShapes(InferenceContext* c) {
  ASSIGN_OR_RETURN(std::vector<DataType> types, GetAttrTypeList(c->node(), "component_types"));
  std::vector<int64_t> flat;
  if (HasAttr(c->node(), "shapes")) {
    ASSIGN_OR_RETURN(flat, GetAttrIntList(c->node(), "shapes"));
  }
  ASSIGN_OR_RETURN(std::vector<PartialShape> shapes, DecodeShapeList(flat, "attribute 'shapes'"));
  if (!shapes.empty() && shapes.size() != types.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'shapes' holds ", shapes.size(), " shapes for ", types.size(), " component types"));
  }
  shapes.resize(types.size(), PartialShape::Unknown());
  return shapes;
}

absl::Status QueueShape(InferenceContext* c) {
  RETURN_IF_ERROR(ComponentShapes(c).status());
  return HandleShape(c);
}

absl::Status DequeueShape(InferenceContext* c, bool batched) {
  ASSIGN_OR_RETURN(std::vector<PartialShape> shapes, ComponentShapes(c));
  int64_t n = -1;
  std::vector<int64_t> known;
  if (batched && c->ConstantInputAsInts(1, &known) && known.size() == 1) n = known[0];
  for (size_t i = 0; i < shapes.size(); ++i) {
    PartialShape s = shapes[i];
    if (batched) {
      PartialShape b({n});
      if (s.unknown_rank()) {
        b = PartialShape::Unknown();
      } else {
        for (int64_t d : s.dims()) b.AppendDim(d);
      }
      s = b;
    }
    c->set_output(static_cast<int>(i), s);
  }
  return absl::OkStatus();
}

OpDefBuilder QueueOp(const char* name) {
  return std::move(OpDefBuilder(name)
                       .Output("handle: Ref(string)")
                       .Attr("component_types: list(type)")
                       .Attr("shapes: list(int) = []")
                       .Attr("capacity: int = -1")
                       .Attr("container: string = ''")
                       .Attr("shared_name: string = ''")
                       .SetIsStateful()
                       .SetShapeFn(QueueShape));
}

OpDefBuilder ReaderOp(const char* name) {
  return std::move(OpDefBuilder(name)
                       .Output("reader_handle: Ref(string)")
                       .Attr("container: string = ''")
                       .Attr("shared_name: string = ''")
                       .SetIsStateful()
                       .SetShapeFn(HandleShape));
}

}  // namespace

void RegisterQueueOps(OpRegistry* r) {
  // First in, first out; `capacity` elements at most (-1: unbounded).
  r->MustRegister(QueueOp("FIFOQueue"));
  // Dequeues pad each component to the batch's largest shape (zeros, empty strings).
  r->MustRegister(QueueOp("PaddingFIFOQueue"));
  // Dequeues take uniformly random elements, keeping `min_after_dequeue`
  // back until the queue is closed.
  r->MustRegister(std::move(
      QueueOp("RandomShuffleQueue").Attr("min_after_dequeue: int = 0").Attr("seed: int = 0").Attr("seed2: int = 0")));
  for (const char* op : {"QueueEnqueue", "QueueEnqueueMany"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("handle: Ref(string)")
                        .Input("components: Tcomponents")
                        .Attr("Tcomponents: list(type)")
                        .Attr("timeout_ms: int = -1")
                        .SetIsStateful()
                        .SetShapeFn([](InferenceContext*) { return absl::OkStatus(); }));
  }
  r->MustRegister(OpDefBuilder("QueueDequeue")
                      .Input("handle: Ref(string)")
                      .Output("components: component_types")
                      .Attr("component_types: list(type)")
                      .Attr("shapes: list(int) = []")
                      .Attr("timeout_ms: int = -1")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) { return DequeueShape(c, false); }));
  for (const char* op : {"QueueDequeueMany", "QueueDequeueUpTo"}) {
    r->MustRegister(OpDefBuilder(op)
                        .Input("handle: Ref(string)")
                        .Input("n: int32")
                        .Output("components: component_types")
                        .Attr("component_types: list(type)")
                        .Attr("shapes: list(int) = []")
                        .Attr("timeout_ms: int = -1")
                        .SetIsStateful()
                        .SetShapeFn([up_to = std::string(op) == "QueueDequeueUpTo"](InferenceContext* c) {
                          RETURN_IF_ERROR(DequeueShape(c, true));
                          if (up_to) {  // the batch may be smaller
                            for (int i = 0; i < c->num_outputs(); ++i) {
                              PartialShape s = c->output(i);
                              if (s.rank() > 0) {
                                PartialShape b({-1});
                                for (int k = 1; k < s.rank(); ++k) b.AppendDim(s.dim(k));
                                c->set_output(i, b);
                              }
                            }
                          }
                          return absl::OkStatus();
                        }));
  }
  r->MustRegister(OpDefBuilder("QueueClose")
                      .Input("handle: Ref(string)")
                      .Attr("cancel_pending_enqueues: bool = false")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext*) { return absl::OkStatus(); }));
  r->MustRegister(OpDefBuilder("QueueSize")
                      .Input("handle: Ref(string)")
                      .Output("size: int32")
                      .SetIsStateful()
                      .SetShapeFn(ScalarShape));
  r->MustRegister(OpDefBuilder("QueueIsClosed")
                      .Input("handle: Ref(string)")
                      .Output("is_closed: bool")
                      .SetIsStateful()
                      .SetShapeFn(ScalarShape));

  // Readers: each read takes the next record of the current file, and the
  // next file name from a queue of strings when a file is done.
  r->MustRegister(std::move(ReaderOp("TFRecordReader").Attr("compression_type: string = ''")));
  r->MustRegister(std::move(ReaderOp("FixedLengthRecordReader")
                                .Attr("header_bytes: int = 0")
                                .Attr("record_bytes: int")
                                .Attr("footer_bytes: int = 0")
                                .Attr("hop_bytes: int = 0")
                                .Attr("encoding: string = ''")));
  r->MustRegister(ReaderOp("WholeFileReader"));
  r->MustRegister(std::move(ReaderOp("TextLineReader").Attr("skip_header_lines: int = 0")));
  // key: "file:record", value: the record's bytes. OutOfRange once the
  // file queue is closed and empty.
  r->MustRegister(OpDefBuilder("ReaderRead")
                      .Input("reader_handle: Ref(string)")
                      .Input("queue_handle: Ref(string)")
                      .Output("key: string")
                      .Output("value: string")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        c->set_output(0, PartialShape::Scalar());
                        c->set_output(1, PartialShape::Scalar());
                        return absl::OkStatus();
                      }));
  // Up to `num_records` records (fewer at the end of the input), as two
  // vectors; OutOfRange when the file queue is closed and empty and none
  // was read.
  r->MustRegister(OpDefBuilder("ReaderReadUpTo")
                      .Input("reader_handle: Ref(string)")
                      .Input("queue_handle: Ref(string)")
                      .Input("num_records: int64")
                      .Output("keys: string")
                      .Output("values: string")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        c->set_output(0, PartialShape({-1}));
                        c->set_output(1, PartialShape({-1}));
                        return absl::OkStatus();
                      }));
  r->MustRegister(OpDefBuilder("ReaderNumRecordsProduced")
                      .Input("reader_handle: Ref(string)")
                      .Output("records_produced: int64")
                      .SetIsStateful()
                      .SetShapeFn(ScalarShape));
}

}  // namespace distflow

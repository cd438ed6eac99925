"""tf.summary: summary ops that build serialized Summary protos in the graph
(scalar, histogram, image, text, merge, merge_all), and FileWriter, which
puts them in TensorBoard event files through the C++ EventWriter
(distflow/train/event_writer.h).

    loss_summary = tf.summary.scalar("loss", loss)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter("logs", sess.graph)
    writer.add_summary(sess.run(merged), step)

Summary, Event and the other messages are protobuf classes generated from
proto/summary.proto and proto/event.proto (distflow.proto)."""
from distflow.proto.event_pb2 import Event, LogMessage, SessionLog, TaggedRunMetadata  # noqa: F401
from distflow.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata  # noqa: F401
from distflow.summary.summary_ops import histogram, image, merge, merge_all, scalar, tensor_summary, text  # noqa: F401
from distflow.summary.writer import FileWriter, FileWriterCache  # noqa: F401


__all__ = ["scalar", "histogram", "image", "text", "tensor_summary", "merge", "merge_all", "FileWriter",
           "FileWriterCache", "Summary", "SummaryMetadata", "HistogramProto", "Event", "SessionLog",
           "TaggedRunMetadata", "LogMessage"]


def __getattr__(name):
    # As the rest of distflow.compat.v1: a TensorFlow name not here yet says so.
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(f"distflow.compat.v1 has no tf.summary.{name} yet")

"""Protocol buffer classes of the TensorBoard formats, generated at build time
from proto/summary.proto and proto/event.proto (summary_pb2, event_pb2)."""

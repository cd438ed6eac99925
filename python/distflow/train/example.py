"""tf.train.Example and its parts: the Python classes of proto/example.proto,
whose field numbers are TensorFlow's, so serialized examples interoperate."""
from distflow.proto.example_pb2 import (BytesList, Example, Feature, FeatureList, FeatureLists,  # noqa: F401
                                        Features, FloatList, Int64List, SequenceExample)

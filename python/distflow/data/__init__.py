"""tf.data: datasets and iterators run by the C++ runtime (see
dataset_ops.py)."""
from distflow.data import experimental  # noqa: F401
from distflow.data.dataset_ops import AUTOTUNE, Dataset, DatasetV1  # noqa: F401
from distflow.data.iterator_ops import (  # noqa: F401
    Iterator, get_output_classes, get_output_shapes, get_output_types, make_initializable_iterator,
    make_one_shot_iterator)
from distflow.data.readers import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset  # noqa: F401

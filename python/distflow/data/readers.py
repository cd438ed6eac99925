"""File datasets: TextLineDataset, FixedLengthRecordDataset and
TFRecordDataset. Files are read by the task
that runs the dataset's op."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.data import dataset_ops as _ds


def _filenames(filenames):
    if isinstance(filenames, _fw.Tensor):
        return filenames
    if isinstance(filenames, (str, bytes)):
        filenames = [filenames]
    return _fw.constant(list(filenames), dtype=_dtypes.string)


class _FileDataset(_ds.Dataset):
    def __init__(self, filenames):
        self._filenames = filenames
        super().__init__(_dtypes.string, _fw.TensorShape([]))


class TextLineDataset(_FileDataset):
    def __init__(self, filenames, compression_type=None, buffer_size=None):
        if compression_type:
            raise NotImplementedError(f"TextLineDataset reads uncompressed files only, not {compression_type}")
        super().__init__(filenames)

    def _build(self):
        return _raw.TextLineDataset(filenames=_filenames(self._filenames))


class FixedLengthRecordDataset(_FileDataset):
    def __init__(self, filenames, record_bytes, header_bytes=None, footer_bytes=None, buffer_size=None):
        self._sizes = (header_bytes or 0, record_bytes, footer_bytes or 0)
        super().__init__(filenames)

    def _build(self):
        h, r, f = self._sizes
        return _raw.FixedLengthRecordDataset(filenames=_filenames(self._filenames), header_bytes=_ds._i64(h, "header_bytes"),
                                             record_bytes=_ds._i64(r, "record_bytes"),
                                             footer_bytes=_ds._i64(f, "footer_bytes"))


class TFRecordDataset(_FileDataset):
    def __init__(self, filenames, compression_type=None, buffer_size=None, num_parallel_reads=None):
        self._compression = compression_type or ""
        super().__init__(filenames)

    def _build(self):
        return _raw.TFRecordDataset(filenames=_filenames(self._filenames),
                                    compression_type=_fw.constant(self._compression, dtype=_dtypes.string))

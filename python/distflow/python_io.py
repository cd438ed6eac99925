"""tf.python_io: TFRecord files written and read from Python, byte for
byte as TensorFlow does (src/data/record_io.h). A damaged record raises
DataLossError naming the file and the record's byte offset."""
from distflow import _distflow


class TFRecordCompressionType:
    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    compression_type_map = {TFRecordCompressionType.ZLIB: "ZLIB", TFRecordCompressionType.GZIP: "GZIP",
                            TFRecordCompressionType.NONE: ""}

    def __init__(self, compression_type=None):
        self.compression_type = compression_type

    @classmethod
    def get_compression_type_string(cls, options):
        if options is None:
            return ""
        if isinstance(options, str):
            return "" if options.upper() == "NONE" else options.upper()
        c = options.compression_type
        if c is None:
            return ""
        if isinstance(c, str):
            return "" if c.upper() == "NONE" else c.upper()
        return cls.compression_type_map[c]


class TFRecordWriter:
    """Writes records to a TFRecord file; a context manager."""

    def __init__(self, path, options=None):
        self._path = str(path)
        self._writer = _distflow.TFRecordWriter(self._path, TFRecordOptions.get_compression_type_string(options))

    def write(self, record):
        if isinstance(record, str):
            record = record.encode()
        self._writer.write(bytes(record))

    def flush(self):
        self._writer.flush()

    def close(self):
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def tf_record_iterator(path, options=None):
    """The records of a TFRecord file, as bytes."""
    it = _distflow.TFRecordIterator(str(path), TFRecordOptions.get_compression_type_string(options))
    while True:
        record = it.next()
        if record is None:
            return
        yield record

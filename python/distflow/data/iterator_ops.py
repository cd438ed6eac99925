"""tf.data iterators (tf.data.Iterator): a handle naming an iterator resource
on the task running the op. get_next() yields the next element's tensors;
at the end of the dataset running it raises tf.errors.OutOfRangeError."""
from distflow import dtypes as _dtypes
from distflow import framework as _fw
from distflow import raw_ops as _raw
from distflow.data import dataset_ops as _ds
from distflow.data import structure as _nest


def _encode_shapes(shapes):
    """The list(int) form of IteratorGetNext's output_shapes (rank, dims...; -1 unknown)."""
    code = []
    for s in shapes:
        if s is None:
            code.append(-1)
        else:
            code.append(len(s))
            code.extend(-1 if d is None else int(d) for d in s)
    return code


class Iterator:
    def __init__(self, handle, types, shapes, initializer=None):
        self._handle_t, self._types, self._shapes = handle, types, shapes
        self._initializer = initializer

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name=None, output_classes=None):
        types = _nest.map_structure(_dtypes.as_dtype, output_types)
        if output_shapes is None:
            output_shapes = _nest.map_structure(lambda _: _fw.TensorShape(None), types)
        else:
            _nest.assert_same_structure(types, output_shapes, "Iterator.from_structure")
            output_shapes = _nest.map_structure(lambda s: _fw.TensorShape(_ds._dims(s)), output_shapes)
        handle = _raw.Iterator(shared_name=shared_name or "")
        return Iterator(handle, types, output_shapes)

    @staticmethod
    def from_string_handle(string_handle, output_types, output_shapes=None, output_classes=None):
        it = Iterator.from_structure(output_types, output_shapes)
        it._handle_t = string_handle
        return it

    @staticmethod
    def _one_shot(dataset):
        handle = _raw.OneShotIterator(dataset=dataset._handle())
        return Iterator(handle, dataset._types, dataset._shapes)

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("This iterator has no initializer: make it with make_initializable_iterator() "
                             "or use make_initializer(dataset)")
        return self._initializer

    output_types = property(lambda self: self._types)
    output_shapes = property(lambda self: self._shapes)
    output_classes = property(lambda self: _nest.map_structure(lambda _: _fw.Tensor, self._types))

    def make_initializer(self, dataset, name=None):
        if _nest.flatten(dataset._types) != _nest.flatten(self._types):
            raise TypeError(f"Iterator.make_initializer: the dataset's elements are {dataset._types} but the "
                            f"iterator's are {self._types}")
        return _raw.MakeIterator(dataset=dataset._handle(), iterator=self._handle_t, name=name)

    def get_next(self, name=None):
        types = _nest.flatten(self._types)
        shapes = [_ds._dims(s) for s in _nest.flatten(self._shapes)]
        out = _raw.IteratorGetNext(iterator=self._handle_t, output_types=types,
                                   output_shapes=_encode_shapes(shapes), name=name)
        out = list(out) if isinstance(out, tuple) else [out]
        return _nest.pack(self._types, out)

    def string_handle(self, name=None):
        return _raw.Identity(input=self._handle_t, name=name)


def make_one_shot_iterator(dataset):
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset, shared_name=None):
    return dataset.make_initializable_iterator(shared_name)


def get_output_types(dataset):
    return dataset.output_types


def get_output_shapes(dataset):
    return dataset.output_shapes


def get_output_classes(dataset):
    return dataset.output_classes

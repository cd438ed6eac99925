"""dtypes: float32, int64, ... as TensorFlow names them, mapped to distflow's
DataType and to numpy."""
import numpy as np

from distflow import _distflow

_DT = _distflow.DataType


class DType:
    def __init__(self, name, enum, numpy_dtype):
        self.name = name
        self._distflow_dtype = enum
        self.as_numpy_dtype = numpy_dtype

    @property
    def base_dtype(self):
        return self

    @property
    def is_floating(self):
        return self in (float32, float64)

    @property
    def is_integer(self):
        return self in (int32, int64, uint8)

    def __eq__(self, other):
        try:
            return as_dtype(other)._distflow_dtype == self._distflow_dtype
        except TypeError:
            return False

    def __hash__(self):
        return int(self._distflow_dtype)

    def __repr__(self):
        return "tf." + self.name


float32 = DType("float32", _DT.DT_FLOAT, np.float32)
float64 = DType("float64", _DT.DT_DOUBLE, np.float64)
int32 = DType("int32", _DT.DT_INT32, np.int32)
int64 = DType("int64", _DT.DT_INT64, np.int64)
uint8 = DType("uint8", _DT.DT_UINT8, np.uint8)
bool = DType("bool", _DT.DT_BOOL, np.bool_)  # noqa: A001 (TensorFlow's name)
string = DType("string", _DT.DT_STRING, np.object_)
float = float32  # noqa: A001
double = float64

_ALL = [float32, float64, int32, int64, uint8, bool, string]
_BY_ENUM = {int(d._distflow_dtype): d for d in _ALL}
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"float": float32, "double": float64})


def as_dtype(value):
    """A DType from a DType, a DataType, a name ("float32"), a numpy dtype or
    a Python type; TypeError naming the value otherwise."""
    if isinstance(value, DType):
        return value
    if isinstance(value, _DT):
        if int(value) in _BY_ENUM:
            return _BY_ENUM[int(value)]
    elif isinstance(value, str):
        if value in _BY_NAME:
            return _BY_NAME[value]
    else:
        try:
            npd = np.dtype(value)
        except TypeError:
            npd = None
        if npd is not None:
            if npd.kind in ("U", "S", "O"):
                return string
            for d in _ALL:
                if d is not string and np.dtype(d.as_numpy_dtype) == npd:
                    return d
    raise TypeError(f"Cannot convert {value!r} to a distflow dtype "
                    f"(have: {', '.join(d.name for d in _ALL)})")

"""One function per registered op, generated at import from the C++ op
registry (names, inputs, attributes): raw_ops.MatMul(a=x, b=w,
transpose_b=True). Inputs may be Tensors or values convertible to them;
attributes that the inputs determine (types, list lengths) or that have
defaults may be left out. The TensorFlow 1.x functions (tf.matmul, ...)
are written on top of these."""
from distflow import _distflow
from distflow import dtypes as _dtypes
from distflow import framework as _fw

_OPS = {op["name"]: op for op in _distflow.registered_ops()}


def _make(info):
    input_names = [a["name"] for a in info["inputs"]]
    attrs = {a["name"]: a for a in info["attrs"]}

    def op_fn(*args, name=None, **kwargs):
        if len(args) > len(input_names):
            raise TypeError(f"{info['name']} takes {len(input_names)} positional inputs "
                            f"({', '.join(input_names) or 'none'}), got {len(args)}")
        given = dict(zip(input_names, args))
        for k in list(kwargs):
            if k in input_names:
                if k in given:
                    raise TypeError(f"{info['name']} got input '{k}' twice")
                given[k] = kwargs.pop(k)
        missing = [n for n in input_names if n not in given]
        if missing:
            raise TypeError(f"{info['name']} is missing input(s): {', '.join(missing)}")
        for k in kwargs:
            if k not in attrs:
                raise TypeError(f"{info['name']} has no input or attribute '{k}' "
                                f"(inputs: {', '.join(input_names) or 'none'}; "
                                f"attributes: {', '.join(attrs) or 'none'})")
        # Values that are not Tensors take the dtype of a Tensor input that
        # shares their type attribute (2 * x is float if x is).
        known = {}
        for a in info["inputs"]:
            v = given[a["name"]]
            if a["type_attr"] and isinstance(v, _fw.Tensor):
                known[a["type_attr"]] = v.dtype
        inputs = []
        for a in info["inputs"]:
            v = given[a["name"]]
            want = None
            if a["type_attr"]:
                want = known.get(a["type_attr"])
                if want is None and a["type_attr"] in kwargs:
                    want = _dtypes.as_dtype(kwargs[a["type_attr"]])
            elif int(a["type"]) != 0:
                want = _dtypes.as_dtype(a["type"])
            if a["number_attr"] or a["type_list_attr"]:
                inputs.append([_fw.convert_to_tensor(e, dtype=want) for e in v])
            else:
                inputs.append(_fw.convert_to_tensor(v, dtype=want))
        attr_values = {}
        for k, v in kwargs.items():
            kind = attrs[k]["kind"]
            if kind == "type":
                v = _dtypes.as_dtype(v)._distflow_dtype
            elif kind == "list(type)":
                v = [_dtypes.as_dtype(t)._distflow_dtype for t in v]
            attr_values[k] = v
        return _fw._apply(info["name"], inputs, attr_values, name=name)

    op_fn.__name__ = info["name"]
    ins = ", ".join(input_names) or "none"
    ats = ", ".join(f"{a['name']}: {a['kind']}" + (f" = {a['default']}" if a["has_default"] else "")
                    for a in info["attrs"] if not (a["inferred"] and not a["has_default"]))
    op_fn.__doc__ = f"The {info['name']} op. Inputs: {ins}. Attributes: {ats or 'none'}."
    return op_fn


for _name, _info in _OPS.items():
    globals()[_name] = _make(_info)


def __getattr__(name):
    raise AttributeError(f"distflow has no op named '{name}'")

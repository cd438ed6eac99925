"""Nested structures of a dataset's elements (tf.data's nest): tuples,
namedtuples and dicts (by sorted key) of components. A list, like a numpy
array, is one component, as in TensorFlow's tf.data."""


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def flatten(structure):
    """The components of `structure`, depth first."""
    if isinstance(structure, dict):
        return [c for k in sorted(structure) for c in flatten(structure[k])]
    if isinstance(structure, tuple):
        return [c for s in structure for c in flatten(s)]
    return [structure]


def pack(template, flat):
    """`flat` (a list of components) in the shape of `template`."""
    flat = list(flat)
    n = len(flatten(template))
    if n != len(flat):
        raise ValueError(f"A structure of {n} components cannot hold {len(flat)}")
    it = iter(flat)

    def build(t):
        if isinstance(t, dict):
            return {k: build(t[k]) for k in sorted(t)}
        if _is_namedtuple(t):
            return type(t)(*[build(s) for s in t])
        if isinstance(t, tuple):
            return tuple(build(s) for s in t)
        return next(it)

    out = build(template)
    if isinstance(template, dict):  # keep the user's key order
        out = {k: out[k] for k in template}
    return out


def map_structure(fn, *structures):
    flats = [flatten(s) for s in structures]
    return pack(structures[0], [fn(*xs) for xs in zip(*flats)])


def assert_same_structure(a, b, what):
    if not _same(a, b):
        raise TypeError(f"{what}: the structures differ: {a!r} and {b!r}")


def _same(a, b):
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and sorted(a) == sorted(b) and \
            all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_same(x, y) for x, y in zip(a, b))
    return True

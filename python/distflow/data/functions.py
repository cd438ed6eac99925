"""Dataset transformations that run a traced Python function per element
(map, filter, flat_map): they need graph functions in the runtime."""


def _missing(what):
    raise NotImplementedError(f"distflow.compat.v1 has no tf.data.Dataset.{what} yet: it needs graph functions "
                              "(a Python function traced into the graph), which distflow does not have yet")


def MapDataset(dataset, fn, num_parallel_calls=None):  # noqa: N802 (a class once functions exist)
    _missing("map")


def FilterDataset(dataset, predicate):  # noqa: N802
    _missing("filter")


def FlatMapDataset(dataset, fn):  # noqa: N802
    _missing("flat_map")

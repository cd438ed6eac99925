"""The global step: create_global_step, get_global_step, get_or_create_global_step."""
from distflow import framework as _fw


def create_global_step(graph=None):
    """An int64 variable "global_step" (not trainable), zero at first."""
    g = graph or _fw.get_default_graph()
    if "global_step" in g._variables:
        raise ValueError("global_step already exists")
    with g.as_default():
        return _fw.get_variable("global_step", [], dtype=_fw._dtypes.int64,
                                initializer=_fw.zeros_initializer(), trainable=False)


def get_global_step(graph=None):
    g = graph or _fw.get_default_graph()
    return g._variables.get("global_step")


def get_or_create_global_step(graph=None):
    return get_global_step(graph) or create_global_step(graph)


def global_step(sess, global_step_tensor):
    """The global step's value, as an int (tf.train.global_step)."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor):
    if global_step_tensor is None or global_step_tensor.dtype.name not in ("int32", "int64"):
        raise TypeError(f"Existing \"global_step\" does not have integer type: {global_step_tensor}")

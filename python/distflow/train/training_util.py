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
    """As TF: the GLOBAL_STEP collection's variable, else the variable named
    "global_step" (a TF1 program's tf.Variable(0, name="global_step"))."""
    g = graph or _fw.get_default_graph()
    v = g._variables.get("global_step")
    if v is not None:
        return v
    steps = g.get_collection(_fw.GraphKeys.GLOBAL_STEP)
    if steps:
        return steps[0]
    for v in g.get_collection(_fw.GraphKeys.GLOBAL_VARIABLES):
        if isinstance(v, _fw.Variable) and v.op.name == "global_step":
            return v
    return None


def get_or_create_global_step(graph=None):
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess, global_step_tensor):
    """The global step's value, as an int (tf.train.global_step)."""
    return int(sess.run(global_step_tensor))


def assert_global_step(global_step_tensor):
    if global_step_tensor is None or global_step_tensor.dtype.name not in ("int32", "int64"):
        raise TypeError(f"Existing \"global_step\" does not have integer type: {global_step_tensor}")

"""tf.train.export_meta_graph and import_meta_graph.

A distflow meta graph is a JSON document: the graph as a serialized
GraphDef (base64), the graph's collections (tensors, operations and
variables by name; strings and numbers as they are; anything else is left
out, as TensorFlow leaves out what it cannot serialize), and what the
graph itself keeps beside its nodes: the variables' initializers, the
trainable variables, the local variables and the graph seed. Importing it
into another graph (optionally under `import_scope`) brings back the nodes
and the collections, so a program can rebuild its model from the file and
restore a checkpoint into it without the code that built it.
"""
import base64
import json
import os

from distflow import _distflow
from distflow import framework as _fw

FORMAT = "distflow.MetaGraph"
VERSION = 1


def _entry(item):
    if isinstance(item, _fw.Variable):
        return {"variable": item.name, "initial_value": item.initial_value.name, "trainable": item.trainable}
    if isinstance(item, _fw.Tensor):
        return {"tensor": item.name}
    if isinstance(item, _fw.Operation):
        return {"op": item.name}
    if isinstance(item, (str, bool, int, float)):
        return {"value": item}
    return None


def _meta_graph(graph, collection_list=None):
    root = graph._root
    keys = graph.get_all_collection_keys() if collection_list is None else list(collection_list)
    collections = {}
    for key in keys:
        entries = [_entry(item) for item in graph.get_collection(key)]
        entries = [e for e in entries if e is not None]
        if entries and isinstance(key, str):
            collections[key] = entries
    return {
        "format": FORMAT,
        "version": VERSION,
        "graph_def": base64.b64encode(_distflow.graph_def(root)).decode("ascii"),
        "collections": collections,
        "initializers": [op.name for op in root.initializers()],
        "trainable_variables": [v.name for v in root.trainable_variables()],
        "local_variable_ops": sorted(graph._local_variable_ops),
        "get_variable": {name: v.name for name, v in graph._variables.items() if isinstance(v, _fw.Variable)},
        "seed": graph.seed,
    }


def export_meta_graph(filename=None, meta_info_def=None, graph_def=None, saver_def=None, collection_list=None,
                      as_text=False, graph=None, export_scope=None, clear_devices=False,
                      clear_extraneous_savers=False, strip_default_attrs=False, save_debug_info=False, **kwargs):
    """Writes the default graph (or `graph`) and its collections to
    `filename` (if given) and returns the meta graph as a dict."""
    if export_scope is not None:
        raise NotImplementedError("export_meta_graph(export_scope=...): distflow exports the whole graph")
    graph = graph or _fw.get_default_graph()
    meta = _meta_graph(graph, collection_list)
    if filename:
        directory = os.path.dirname(os.path.abspath(filename))
        os.makedirs(directory, exist_ok=True)
        tmp = f"{filename}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(meta, f, indent=1 if as_text else None)
        os.replace(tmp, filename)
    return meta


def _read(meta_graph_or_file):
    if isinstance(meta_graph_or_file, dict):
        meta = meta_graph_or_file
        where = "the meta graph"
    else:
        where = str(meta_graph_or_file)
        try:
            with open(meta_graph_or_file) as f:
                meta = json.load(f)
        except FileNotFoundError:
            raise OSError(f"import_meta_graph: no such file '{where}'") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"import_meta_graph: '{where}' is not a distflow meta graph ({e}); "
                             f"distflow reads the .meta files its own export_meta_graph writes") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError(f"import_meta_graph: '{where}' is not a distflow meta graph")
    if meta.get("version", 0) > VERSION:
        raise ValueError(f"import_meta_graph: '{where}' is version {meta.get('version')} of the format; "
                         f"this distflow reads up to {VERSION}")
    return meta


def _variable(graph, tensor, initial_value, trainable):
    """The Python Variable of an imported variable op (no new nodes)."""
    v = _fw.Variable.__new__(_fw.Variable)
    _fw.Tensor.__init__(v, tensor._out, graph)
    v.initial_value = initial_value
    v.trainable = bool(trainable)
    v.constraint = None
    return v


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **saver_kwargs):
    """Adds the nodes and collections of a meta graph (a file written by
    export_meta_graph or Saver.save, or the dict export_meta_graph returned)
    to the default graph; returns a Saver of its variables, or None if it
    has none, as TensorFlow does."""
    meta = _read(meta_graph_or_file)
    graph = _fw.get_default_graph()
    if graph.finalized:
        raise RuntimeError("import_meta_graph: the graph is finalized and cannot be modified")
    prefix = f"{import_scope}/" if import_scope else ""
    try:
        graph_def = base64.b64decode(meta["graph_def"], validate=True)
    except (KeyError, ValueError, TypeError):
        raise ValueError("import_meta_graph: the meta graph's graph_def is missing or damaged") from None
    root = graph._root
    _distflow.import_graph_def(root, graph_def, prefix, bool(clear_devices))

    def scoped(name):
        return prefix + name

    for name in meta.get("initializers", []):
        op = root.find_operation(scoped(name))
        if op is not None:
            _distflow.add_initializer(root, op)
    for name in meta.get("trainable_variables", []):
        graph_op, _, index = scoped(name).rpartition(":")
        op = root.find_operation(graph_op)
        if op is not None:
            _distflow.add_trainable_variable(root, _distflow.Output(op, int(index or 0), root))
    for name in meta.get("local_variable_ops", []):
        graph._local_variable_ops.add(scoped(name))
    if meta.get("seed") is not None and graph.seed is None:
        graph.seed = meta["seed"]

    variables = {}

    def element(entry):
        if "variable" in entry:
            name = scoped(entry["variable"])
            if name not in variables:
                initial = graph.get_tensor_by_name(scoped(entry["initial_value"]))
                variables[name] = _variable(graph, graph.get_tensor_by_name(name), initial, entry["trainable"])
            return variables[name]
        if "tensor" in entry:
            return graph.get_tensor_by_name(scoped(entry["tensor"]))
        if "op" in entry:
            return graph.get_operation_by_name(scoped(entry["op"]))
        return entry.get("value")

    for key, entries in meta.get("collections", {}).items():
        for entry in entries:
            graph.add_to_collection(key, element(entry))
    for name, var_name in meta.get("get_variable", {}).items():
        full = scoped(name)
        if full not in graph._variables and scoped(var_name) in variables:
            graph._variables[full] = variables[scoped(var_name)]

    if not variables:
        return None
    from distflow.train.saver import Saver
    return Saver(**saver_kwargs)

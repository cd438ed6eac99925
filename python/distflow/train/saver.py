"""tf.train.Saver, latest_checkpoint and the checkpoint state."""
import os
import re
import types

import numpy as np

from distflow import _distflow
from distflow import framework as _fw
from distflow.train.supervisor import _MonitoredRunner


class Saver:
    """tf.train.Saver: save(sess, "dir/model.ckpt", global_step=n) writes
    dir/model.ckpt-n, and without global_step dir/model.ckpt itself (each
    task holding variables writes its own shard; the newest max_to_keep are
    kept) and returns that prefix; restore(sess, prefix) checks the
    checkpoint against the model first (another model's is a
    FailedPreconditionError listing the differences). By default every
    variable but the local ones (metrics' counters) is saved, as TF1."""

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False, saver_def=None,
                 builder=None, defer_build=False, allow_empty=False, write_version=None, pad_step_number=False,
                 save_relative_paths=False, filename=None):
        self._graph = _fw.get_default_graph()
        if isinstance(var_list, dict):
            renamed = [k for k, v in var_list.items() if k != v.op.name]
            if renamed:
                raise NotImplementedError(f"Saver(var_list=dict) with keys other than the variables' names "
                                          f"({', '.join(sorted(renamed)[:3])}): distflow's checkpoints key each "
                                          f"variable by its own name")
            var_list = list(var_list.values())
        self._var_list = [v._out for v in (var_list or [])]
        self._exclude = [v._out for v in self._graph.get_collection(_fw.GraphKeys.LOCAL_VARIABLES)]
        self._max_to_keep = max_to_keep
        self._allow_empty = allow_empty
        self._savers = {}  # by basename
        self.last_checkpoints = []
        if not defer_build:
            try:
                self._saver("model.ckpt")  # the ops, now, before a session finalizes the graph
            except _distflow.InvalidArgumentError:
                if not allow_empty:
                    raise ValueError("No variables to save")

    def build(self):
        self._saver("model.ckpt")

    def _saver(self, basename):
        if basename not in self._savers:
            with self._graph.as_default():
                self._savers[basename] = _distflow.Saver(self._graph._scope(), self._var_list,
                                                         self._max_to_keep, basename, self._exclude,
                                                         slices=self._slices())
        return self._savers[basename]

    def _slices(self):
        return save_slices(self._graph, self._var_list, self._exclude)

    @staticmethod
    def _plain(sess):
        if isinstance(sess, _MonitoredRunner):
            return sess._monitored  # its current session, whichever recovery made it
        if not isinstance(sess, _fw.Session):
            raise TypeError(f"Saver.save/restore take a tf.Session, not {type(sess).__name__}")
        return sess._sess

    def save(self, sess, save_path, global_step=None, latest_filename=None, meta_graph_suffix="meta",
             write_meta_graph=True, write_state=True, strip_default_attrs=False, save_debug_info=False):
        logdir, basename = os.path.split(os.path.abspath(save_path))
        if global_step is None:
            step = None
        elif isinstance(global_step, _fw.Tensor):
            step = int(sess.run(global_step))
        else:
            step = int(global_step)
        prefix = self._saver(basename).save(self._plain(sess), logdir, step)
        if write_meta_graph:
            from distflow.train.meta_graph import export_meta_graph
            export_meta_graph(f"{prefix}.{meta_graph_suffix}", graph=self._graph)
        self.last_checkpoints = (self.last_checkpoints + [prefix])[-max(1, self._max_to_keep or 1):]
        return prefix

    def restore(self, sess, save_path):
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        try:
            return self._saver(next(iter(self._savers), "model.ckpt")).restore(self._plain(sess), save_path)
        except _distflow.FailedPreconditionError as e:
            # Parts saved before checkpoints recorded slices, with another
            # number of parts? Re-slice those, then restore the rest.
            if "missing from the checkpoint" not in str(e) or not _repartitioned_restore(self._graph, self._plain(sess), save_path, self._var_list, self._exclude):
                raise

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False, export_scope=None,
                          clear_devices=False, clear_extraneous_savers=False, strip_default_attrs=False,
                          save_debug_info=False):
        from distflow.train.meta_graph import export_meta_graph
        return export_meta_graph(filename, collection_list=collection_list, as_text=as_text, graph=self._graph,
                                 export_scope=export_scope, clear_devices=clear_devices)

    def as_saver_def(self):
        raise NotImplementedError("Saver.as_saver_def: distflow's checkpoints have no SaverDef")


def save_slices(graph, var_list=(), exclude=()):
    """(part, full name, full shape, offset) of every part of a
    PartitionedVariable of `graph` that is saved (in var_list if one is
    given, else not in exclude; both C++ outputs), from its save_slice_info:
    the checkpoint records each part as a slice of the full variable, so it
    restores into any number of parts, or into one variable of the full
    shape. The parts' optimizer slots follow their parts (the C++ Saver
    matches them by name)."""
    from distflow.partitioned_variables import PartitionedVariable
    chosen = {o.name for o in var_list}
    excluded = {o.name for o in exclude}
    out = []
    for pv in graph._variables.values():
        if not isinstance(pv, PartitionedVariable):
            continue
        for part in pv:
            info = getattr(part, "_save_slice_info", None)
            name = part._out.name
            if info is None or (chosen and name not in chosen) or (not chosen and name in excluded):
                continue
            out.append((part._out, info.full_name, list(info.full_shape), list(info.var_offset)))
    return out


def _repartitioned_restore(graph, plain_sess, save_path, var_list, exclude):
    """Restores each PartitionedVariable (and its optimizer slots) saved with
    a different number of parts: the checkpoint's parts "<name>/part_k<slot>"
    are joined along the partitioned axis in order (parts are contiguous
    slices, see partitioned_variables.py) and cut to this graph's parts; the
    other variables are restored as usual. False if the checkpoint has no
    parts of this graph's partitioned variables (the mismatch is something
    else, and the caller re-raises it)."""
    from distflow.partitioned_variables import PartitionedVariable
    pvs = [v for v in graph._variables.values() if isinstance(v, PartitionedVariable)]
    if not pvs:
        return False
    prefix = os.path.abspath(save_path)
    saved = _distflow.read_checkpoint_tensors(prefix, [pv.name + "/part_" for pv in pvs])
    feeds, targets, repartitioned = {}, [], []
    for pv in pvs:
        axis = next((i for i, p in enumerate(pv._get_partitions()) if p > 1), 0)
        by_slot = {}
        for name, value in saved.items():
            m = re.fullmatch(re.escape(pv.name) + r"/part_(\d+)(/.*)?", name)
            if m:
                by_slot.setdefault(m.group(2) or "", {})[int(m.group(1))] = value
        for slot, parts in by_slot.items():
            if sorted(parts) != list(range(len(parts))):
                raise ValueError(f"checkpoint {prefix}: the parts of '{pv.name}{slot}' are {sorted(parts)}, "
                                 f"not 0..{len(parts) - 1}")
            whole = np.concatenate([parts[k] for k in range(len(parts))], axis=axis)
            if list(whole.shape) != pv.shape.as_list():
                raise ValueError(f"checkpoint {prefix}: '{pv.name}{slot}' has shape {list(whole.shape)} in its "
                                 f"{len(parts)} parts, the model's is {pv.shape.as_list()}")
            offset = 0
            for part in pv:
                n = part.shape.as_list()[axis]
                try:
                    target = graph.get_tensor_by_name(part.op.name + slot + ":0")
                except KeyError:
                    break  # this model has no such slot
                value = np.take(whole, range(offset, offset + n), axis=axis)
                with graph.as_default():
                    feed = _fw.placeholder(target.dtype, value.shape)
                    targets.append(_fw._apply("Assign", [target, feed]).op)
                feeds[feed] = value
                repartitioned.append(target._out)
                offset += n
    if not repartitioned:
        return False
    with graph.as_default():
        rest = _distflow.Saver(graph._scope(), var_list, 0, "model.ckpt", list(exclude) + repartitioned,
                               allow_extra=True)
    rest.restore(plain_sess, prefix)
    plain_sess.run([(f._out, v) for f, v in feeds.items()], [], [t._op for t in targets], 0)
    return True


def checkpoint_exists(checkpoint_prefix):
    """Whether a checkpoint with this prefix was written (its index exists)."""
    return os.path.exists(checkpoint_prefix + ".index")


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """The newest checkpoint and all that are kept, as TF's CheckpointState
    (model_checkpoint_path, all_model_checkpoint_paths), or None."""
    latest = _distflow.latest_checkpoint(checkpoint_dir)
    if latest is None:
        return None
    state = os.path.join(checkpoint_dir, latest_filename or "checkpoint")
    paths = []
    if os.path.exists(state):
        with open(state) as f:
            for line in f:
                if line.startswith("all_model_checkpoint_paths:"):
                    p = line.split(":", 1)[1].strip().strip('"')
                    paths.append(p if os.path.isabs(p) else os.path.join(checkpoint_dir, p))
    return types.SimpleNamespace(model_checkpoint_path=latest, all_model_checkpoint_paths=paths or [latest])


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The newest checkpoint prefix of `checkpoint_dir`, or None."""
    return _distflow.latest_checkpoint(checkpoint_dir)

"""tf.train's optimizers, each made in C++ (train/optimizer.h)."""
from distflow import _distflow
from distflow import framework as _fw


class Optimizer:
    """An optimizer made in C++ (train/optimizer.h); minimize() adds the
    gradients and the updates to the default graph, each update on its
    variable's device, and increments global_step (int or float) if given."""

    _kind = None

    def __init__(self, **hyper):
        # A tensor-valued learning rate (a decay schedule) is computed by the
        # graph and read beside each update.
        lr = hyper.get("learning_rate")
        if isinstance(lr, _fw.Tensor):
            if lr.dtype not in (_fw._dtypes.float32, _fw._dtypes.float64):
                raise TypeError(f"{type(self).__name__}: learning_rate must be a float tensor, not "
                                f"{lr.dtype.name} ('{lr.name}')")
            hyper["learning_rate"] = lr._out
        self._hyper = hyper
        self._opt = _distflow.Optimizer.create(self._kind, hyper)

    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=1, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        if var_list is not None:
            return self.apply_gradients(self.compute_gradients(loss, var_list=var_list), global_step, name)
        g = _fw.get_default_graph()
        op = self._opt.minimize(g._scope(), _fw.convert_to_tensor(loss)._out,
                                None if global_step is None else global_step._out)
        return _fw.Operation(op, g)

    def compute_gradients(self, loss, var_list=None, gate_gradients=1, aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        g = _fw.get_default_graph()
        pairs = self._opt.compute_gradients(g._scope(), _fw.convert_to_tensor(loss)._out)
        from distflow import sparse_ops as _sparse
        # Invalid gradients become None; a lookup's gradient an IndexedSlices.
        out = [(_sparse._wrap_gradient(gr, g) if gr.ok else None, _fw.Tensor(v, g)) for gr, v in pairs]
        if var_list is not None:
            names = {v.name for v in var_list}
            out = [(gr, v) for gr, v in out if v.name in names]
        return out

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        # As TensorFlow: variables without a gradient are left alone.
        kept = [(gr, v) for gr, v in grads_and_vars if gr is not None]
        if not kept:
            raise ValueError(f"No gradients provided for any variable: {[v.name for _, v in grads_and_vars]}")
        grads_and_vars = kept
        g = _fw.get_default_graph()
        op = self._opt.apply_gradients(g._scope(), [(gr._out, v._out) for gr, v in grads_and_vars],
                                       None if global_step is None else global_step._out)
        return _fw.Operation(op, g)


class GradientDescentOptimizer(Optimizer):
    _kind = "GradientDescent"

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(learning_rate=learning_rate)


class MomentumOptimizer(Optimizer):
    _kind = "Momentum"

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum", use_nesterov=False):
        super().__init__(learning_rate=learning_rate, momentum=momentum, use_nesterov=use_nesterov)


class AdagradOptimizer(Optimizer):
    _kind = "Adagrad"

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False, name="Adagrad"):
        super().__init__(learning_rate=learning_rate, initial_accumulator_value=initial_accumulator_value)


class RMSPropOptimizer(Optimizer):
    _kind = "RMSProp"

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking=False,
                 centered=False, name="RMSProp"):
        if centered:
            raise NotImplementedError("RMSPropOptimizer(centered=True)")
        super().__init__(learning_rate=learning_rate, decay=decay, momentum=momentum, epsilon=epsilon)


class LazyAdamOptimizer(Optimizer):
    """tf.contrib.opt.LazyAdamOptimizer: Adam whose IndexedSlices updates
    touch only the looked-up rows' m, v and values (dense gradients update
    as AdamOptimizer does)."""
    _kind = "LazyAdam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False,
                 name="Adam"):
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon)


class AdamOptimizer(Optimizer):
    _kind = "Adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-08, use_locking=False,
                 name="Adam"):
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon)


class FtrlOptimizer(Optimizer):
    """tf.train.FtrlOptimizer: FTRL-Proximal (train/optimizer.h). Dense
    gradients update with ApplyFtrl; IndexedSlices gradients (embedding
    lookups) with SparseApplyFtrl, on the touched rows only, on the
    variable's task. Slots "accum" and "linear". A positive
    l2_shrinkage_regularization_strength uses ApplyFtrlV2/SparseApplyFtrlV2
    (linear takes grad + 2 * l2_shrinkage * var), as TF."""
    _kind = "Ftrl"

    def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
                 l1_regularization_strength=0.0, l2_regularization_strength=0.0, use_locking=False, name="Ftrl",
                 accum_name=None, linear_name=None, l2_shrinkage_regularization_strength=0.0):
        super().__init__(learning_rate=learning_rate, learning_rate_power=learning_rate_power,
                         initial_accumulator_value=initial_accumulator_value,
                         l1_regularization_strength=l1_regularization_strength,
                         l2_regularization_strength=l2_regularization_strength,
                         l2_shrinkage_regularization_strength=l2_shrinkage_regularization_strength)

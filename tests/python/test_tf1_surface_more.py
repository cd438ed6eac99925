"""More of the TF1 surface, in the forms TF1 programs use it:
Supervisor(init_feed_dict=, init_fn=) and Scaffold(init_feed_dict=) (a
variable initialised from a fed value, e.g. pretrained embeddings, and not
again once a checkpoint restores it), Scaffold(local_init_feed_dict=) (the
local_init_op run with its feeds); tf.GPUOptions and
ConfigProto(gpu_options=) accepted and ignored (no GPU); variable_scope(
partitioner=) giving partitioned variables to get_variable in the scope;
tf.train.FtrlOptimizer on dense and on lookup (IndexedSlices) gradients
against FTRL-Proximal written out in NumPy."""
import numpy as np
import pytest

import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def _pretrained_model():
    pretrained = tf.placeholder(tf.float32, [4, 2], name="pretrained")
    table = tf.Variable(pretrained, name="table")
    step = tf.train.get_or_create_global_step()
    train = tf.assign_add(step, 1)
    return pretrained, table, train


def test_supervisor_runs_init_op_with_init_feed_dict_then_init_fn_and_restores_later(tmp_path):
    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    pretrained, table, train = _pretrained_model()
    calls = []
    sv = tf.train.Supervisor(logdir=str(tmp_path), init_feed_dict={pretrained: value}, save_model_secs=0,
                             init_fn=lambda sess: calls.append(sess.run(table)))
    assert sv.init_feed_dict[pretrained] is value
    with sv.managed_session() as sess:
        np.testing.assert_array_equal(sess.run(table), value)
        sess.run(train)
    assert len(calls) == 1  # init_fn ran once, after init_op, on the session
    np.testing.assert_array_equal(calls[0], value)
    assert tf.train.latest_checkpoint(str(tmp_path)) is not None

    # A second run of the program restores: no feed is needed, init_fn does not run.
    tf.reset_default_graph()
    pretrained, table, train = _pretrained_model()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, init_fn=lambda sess: calls.append("again"))
    with sv.managed_session() as sess:
        np.testing.assert_array_equal(sess.run(table), value)
    assert len(calls) == 1


def test_init_feed_dict_errors_name_the_culprit():
    pretrained, table, _ = _pretrained_model()
    with pytest.raises(ValueError, match="init_feed_dict: 'nowhere:0' names no tensor of the graph"):
        tf.train.Supervisor(init_feed_dict={"nowhere:0": 1.0}).prepare_or_wait_for_session()
    tf.reset_default_graph()
    pretrained, table, _ = _pretrained_model()
    # Without the feed the chief's init_op fails naming the placeholder.
    with pytest.raises(tf.errors.InvalidArgumentError, match="You must feed a value for placeholder 'pretrained'"):
        tf.train.Supervisor().prepare_or_wait_for_session()


def test_scaffold_init_feed_dict_under_monitored_training_session(tmp_path):
    value = np.full((4, 2), 0.25, np.float32)
    pretrained, table, train = _pretrained_model()
    scaffold = tf.train.Scaffold(init_feed_dict={pretrained: value})
    assert tf.train.Scaffold(copy_from_scaffold=scaffold).init_feed_dict is scaffold.init_feed_dict
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), scaffold=scaffold) as sess:
        np.testing.assert_array_equal(sess.run(table), value)
        sess.run(train)


def test_scaffold_local_init_feed_dict_feeds_the_local_init_op(tmp_path):
    # A local variable (never saved, one per task) initialised from a fed
    # value: its initialiser, in the default local_init_op, needs the feed.
    start = tf.placeholder(tf.float32, [3], name="local_start")
    cursor = tf.Variable(start, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES], name="cursor")
    step = tf.train.get_or_create_global_step()
    bump = tf.assign_add(step, 1)
    value = np.array([3.0, -1.0, 0.5], np.float32)
    scaffold = tf.train.Scaffold(local_init_feed_dict={start: value})
    assert tf.train.Scaffold(copy_from_scaffold=scaffold).local_init_feed_dict is scaffold.local_init_feed_dict
    with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path), scaffold=scaffold) as sess:
        np.testing.assert_array_equal(sess.run(cursor), value)
        sess.run(bump)
    # Without the feed the local_init_op cannot run: an error naming the placeholder.
    tf.reset_default_graph()
    start = tf.placeholder(tf.float32, [3], name="local_start")
    cursor = tf.Variable(start, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES], name="cursor")
    tf.train.get_or_create_global_step()
    with pytest.raises(tf.errors.InvalidArgumentError, match="local_start"):
        with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path / "unfed"),
                                               scaffold=tf.train.Scaffold()) as sess:
            sess.run(cursor)
    tf.reset_default_graph()
    with pytest.raises(ValueError, match="local_init_feed_dict: 'nowhere:0' names no tensor"):
        tf.train.MonitoredTrainingSession(scaffold=tf.train.Scaffold(local_init_feed_dict={"nowhere:0": 1.0}))


def test_gpu_options_are_accepted_and_ignored():
    config = tf.ConfigProto(gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.4, allow_growth=True),
                            allow_soft_placement=True, device_count={"GPU": 0})
    assert config.gpu_options.allow_growth is True
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.4
    default = tf.ConfigProto()
    default.gpu_options.allow_growth = True  # the most common TF1 line
    default.gpu_options.visible_device_list = "0"
    for c in (config, default):
        with tf.Session(config=c) as sess:
            assert sess.run(tf.constant(3) * 2) == 6
    with pytest.raises(ValueError, match='GPUOptions has no "allow_grow" field'):
        tf.GPUOptions(allow_grow=True)
    with pytest.raises(TypeError, match="takes a tf.GPUOptions, not dict"):
        tf.ConfigProto(gpu_options={"allow_growth": True})


def test_variable_scope_partitioner_partitions_the_scopes_variables():
    with tf.variable_scope("emb", partitioner=tf.fixed_size_partitioner(3)) as scope:
        assert scope.partitioner is not None
        table = tf.get_variable("table", [10, 4], initializer=tf.zeros_initializer())
        bias = tf.get_variable("bias", [], initializer=tf.zeros_initializer())  # a scalar: never partitioned
        with tf.variable_scope("inner"):
            inner = tf.get_variable("w", [5, 2])
        with tf.variable_scope("own", partitioner=tf.fixed_size_partitioner(2)):
            own = tf.get_variable("w", [6, 2])
    assert isinstance(table, tf.PartitionedVariable)
    assert [v.name for v in table] == ["emb/table/part_0:0", "emb/table/part_1:0", "emb/table/part_2:0"]
    assert [v.shape.as_list() for v in table] == [[4, 4], [3, 4], [3, 4]]
    assert not isinstance(bias, tf.PartitionedVariable) and bias.name == "emb/bias:0"
    assert isinstance(inner, tf.PartitionedVariable) and len(inner) == 3  # inherited
    assert len(own) == 2
    with tf.variable_scope("emb", reuse=True):
        assert tf.get_variable("table", [10, 4]) is table
    ids = np.array([9, 0, 4, 3])
    rows = tf.nn.embedding_lookup(table, ids, partition_strategy="div")
    assign = [v.assign(np.arange(v.shape.as_list()[0] * 4, dtype=np.float32).reshape(-1, 4) + 100 * k)
              for k, v in enumerate(table)]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(assign)
        whole = sess.run(tf.convert_to_tensor(table))
        np.testing.assert_array_equal(sess.run(rows), whole[ids])


def _ftrl_numpy(var, accum, linear, g, lr, l1, l2, power, shrinkage=0.0):
    """TF's FTRL-Proximal, element by element (ApplyFtrlV2 with shrinkage:
    linear takes g + 2 * shrinkage * var, accum still g^2)."""
    new_accum = accum + g * g
    linear = linear + g + 2 * shrinkage * var - (new_accum ** -power - accum ** -power) / lr * var
    quadratic = new_accum ** -power / lr + 2 * l2
    var = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0)
    return var, new_accum, linear


@pytest.mark.parametrize("shrinkage", [0.0, 0.25])
def test_ftrl_optimizer_dense_and_sparse_match_numpy(shrinkage):
    lr, l1, l2, power, init_accum = 0.3, 0.01, 0.02, -0.5, 0.1
    w0 = np.array([[0.5, -0.3], [0.2, 0.1], [-0.4, 0.6]])
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, 0.3]])
    w = tf.Variable(w0, name="w")
    dense_loss = tf.reduce_sum(w * x)  # gradient x
    table = tf.Variable(w0, name="table")
    ids = tf.placeholder(tf.int32, [None])
    sparse_loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids) * 2.0)
    opt = tf.train.FtrlOptimizer(lr, learning_rate_power=power, initial_accumulator_value=init_accum,
                                 l1_regularization_strength=l1, l2_regularization_strength=l2,
                                 l2_shrinkage_regularization_strength=shrinkage)
    (g_table, _), = opt.compute_gradients(sparse_loss, var_list=[table])
    assert isinstance(g_table, tf.IndexedSlices)
    train = opt.minimize(dense_loss + sparse_loss)
    want_w, acc_w, lin_w = w0.copy(), np.full_like(w0, init_accum), np.zeros_like(w0)
    want_t, acc_t, lin_t = w0.copy(), np.full_like(w0, init_accum), np.zeros_like(w0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step_ids in ([2, 0, 2], [0]):
            sess.run(train, {ids: step_ids})
            want_w, acc_w, lin_w = _ftrl_numpy(want_w, acc_w, lin_w, x, lr, l1, l2, power, shrinkage)
            g = np.zeros_like(w0)
            for i in step_ids:
                g[i] += 2.0
            touched = sorted(set(step_ids))
            v, a, li = _ftrl_numpy(want_t[touched], acc_t[touched], lin_t[touched], g[touched], lr, l1, l2, power,
                                   shrinkage)
            want_t[touched], acc_t[touched], lin_t[touched] = v, a, li
        got_w, got_t = sess.run([w, table])
    np.testing.assert_allclose(got_w, want_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_t, want_t, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got_t[1], w0[1])  # never looked up: bit-identical
    with pytest.raises(ValueError, match="learning_rate_power = 0.5 must be <= 0"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match="l2_shrinkage_regularization_strength = -1 must be >= 0"):
        tf.train.FtrlOptimizer(0.1, l2_shrinkage_regularization_strength=-1.0)



def test_supervisor_has_tf1s_camelcase_aliases_and_stop_on_exception():
    _pretrained_model()
    sv = tf.train.Supervisor(init_feed_dict={"pretrained:0": np.zeros((4, 2), np.float32)})
    for alias, name in [("PrepareSession", "prepare_or_wait_for_session"), ("Stop", "stop"),
                        ("RequestStop", "request_stop"), ("ShouldStop", "should_stop"), ("Loop", "loop"),
                        ("StartQueueRunners", "start_queue_runners"), ("WaitForStop", "wait_for_stop"),
                        ("StartStandardServices", "start_standard_services"), ("SummaryComputed", "summary_computed"),
                        ("StopOnException", "stop_on_exception")]:
        assert getattr(tf.train.Supervisor, alias) is getattr(tf.train.Supervisor, name)
    sess = sv.PrepareSession()  # init_feed_dict given by the tensor's name
    assert sess.run("table:0").shape == (4, 2)
    with sv.stop_on_exception():
        raise tf.errors.OutOfRangeError(None, None, "input done")  # as TF: the end of input stops quietly
    assert sv.ShouldStop()
    sv.Stop()

"""Sparse models through distflow.compat.v1: tf.gather, scatters, unique,
segments, dynamic partition/stitch against NumPy; a lookup's gradient is
an IndexedSlices equal to the dense one; optimizers apply it with sparse
kernels (untouched rows bit-identical); embedding_lookup over shards ("mod"
and "div"); bad ids give errors naming the op and the id; and on an
in-process cluster with the table sharded over 2 ps tasks, training works,
the bytes pulled from the ps per step scale with the ids looked up, not with
the table, and a ps keeps serving after a step with a bad id."""
import re
import socket
import urllib.request

import numpy as np
import pytest

import distflow
import distflow.compat.v1 as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield


def test_gather_scatter_unique_segments_match_numpy():
    p = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    ids = np.array([[3, 0], [1, 3]], dtype=np.int64)
    v = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
    upd = tf.scatter_add(v, [3, 0, 3], np.ones((3, 2), np.float32))
    y, idx = tf.unique(tf.constant([4, 1, 4, 2, 1]))
    data = np.arange(10, dtype=np.float64).reshape(5, 2)
    parts = tf.dynamic_partition(data, [1, 0, 1, 1, 0], 2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run({
            "g0": tf.gather(p, ids), "g1": tf.gather(p, [2, 0], axis=1),
            "seg": tf.unsorted_segment_sum(data, [1, -1, 1, 0, 2], 3),
            "ssum": tf.sparse_segment_sum(data, [4, 0, 4, 2], [0, 0, 2, 2]),
            "smean": tf.sparse_segment_mean(data, [4, 0, 4, 2], [0, 0, 2, 2]),
            "stitch": tf.dynamic_stitch([[1, 4], [0, 2, 3]], parts),
            "y": y, "idx": idx})
        after = sess.run(upd)
    np.testing.assert_array_equal(out["g0"], p[ids])
    np.testing.assert_array_equal(out["g1"], np.take(p, [2, 0], axis=1))
    seg = np.zeros((3, 2))
    np.add.at(seg, [1, 1, 0, 2], data[[0, 2, 3, 4]])
    np.testing.assert_array_equal(out["seg"], seg)
    ssum = np.zeros((3, 2))
    np.add.at(ssum, [0, 0, 2, 2], data[[4, 0, 4, 2]])
    np.testing.assert_array_equal(out["ssum"], ssum)
    np.testing.assert_allclose(out["smean"], ssum / np.array([[2], [1], [2]]))
    np.testing.assert_array_equal(out["stitch"], data)
    assert out["y"].tolist() == [4, 1, 2] and out["idx"].tolist() == [0, 1, 0, 2, 1]
    want = np.arange(8, dtype=np.float32).reshape(4, 2)
    np.add.at(want, [3, 0, 3], 1.0)
    np.testing.assert_array_equal(after, want)


def test_lookup_gradient_is_indexed_slices_equal_to_dense():
    table = np.random.RandomState(0).randn(6, 3)
    p = tf.placeholder(tf.float64, [6, 3])
    w = np.random.RandomState(1).randn(5, 3)
    ids = [5, 0, 5, 2, 1]
    loss = tf.reduce_sum(tf.constant(w) * tf.nn.embedding_lookup(p, ids)) + tf.reduce_sum(tf.square(tf.gather(p, [2, 3])))
    (g,) = tf.gradients(loss, [p])
    assert isinstance(g, tf.IndexedSlices)
    with tf.Session() as sess:
        values, indices, dense, shape = sess.run([g.values, g.indices, tf.convert_to_tensor(g), g.dense_shape],
                                                 feed_dict={p: table})
    want = np.zeros_like(table)
    np.add.at(want, ids, w)
    np.add.at(want, [2, 3], 2 * table[[2, 3]])
    np.testing.assert_allclose(dense, want, atol=1e-6)
    assert values.shape == (7, 3) and sorted(indices.tolist()) == sorted(ids + [2, 3])
    assert shape.tolist() == [6, 3]


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_over_shards_matches_numpy(strategy):
    full = np.arange(7 * 2, dtype=np.float32).reshape(7, 2)
    if strategy == "mod":
        shards = [full[k::3] for k in range(3)]
    else:
        shards = [full[0:3], full[3:5], full[5:7]]  # 7 rows over 3: the first shard one longer
    params = [tf.Variable(s) for s in shards]
    ids = np.array([[6, 0, 3], [2, 2, 5]], dtype=np.int32)
    out = tf.nn.embedding_lookup(params, ids, partition_strategy=strategy)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(out)
    np.testing.assert_array_equal(got, full[ids])


def test_adagrad_applies_lookup_gradients_sparsely():
    table = np.random.RandomState(2).randn(8, 4).astype(np.float32)
    emb = tf.Variable(table, name="emb")
    ids = tf.placeholder(tf.int32, [None])
    loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, ids)))
    train = tf.train.AdagradOptimizer(0.5, initial_accumulator_value=0.1).minimize(loss)
    assert tf.get_default_graph().get_operation_by_name("Adagrad/SparseApplyAdagrad").type == "SparseApplyAdagrad"
    with pytest.raises(Exception):
        tf.get_default_graph().get_operation_by_name("Adagrad/ApplyAdagrad")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train, feed_dict={ids: [1, 6, 1]})
        got = sess.run(emb)
    g = np.zeros_like(table)
    np.add.at(g, [1, 6, 1], 2 * table[[1, 6, 1]])
    accum = 0.1 + g * g
    want = table - 0.5 * g / np.sqrt(accum)
    np.testing.assert_allclose(got[[1, 6]], want[[1, 6]], rtol=1e-5)
    untouched = [0, 2, 3, 4, 5, 7]
    assert got[untouched].tobytes() == table[untouched].tobytes()


def test_bad_ids_name_the_op_and_the_id():
    emb = tf.Variable(np.zeros((4, 2), np.float32))
    ids = tf.placeholder(tf.int64, [None])
    out = tf.nn.embedding_lookup(emb, ids)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Gather.*indices\[1\] = 10 is not in \[0, 4\)"):
            sess.run(out, feed_dict={ids: [0, 10]})
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[0\] = -1 is not in \[0, 4\)"):
            sess.run(out, feed_dict={ids: [-1]})
        assert sess.run(out, feed_dict={ids: [3]}).shape == (1, 2)
    with pytest.raises(TypeError, match="ids must be int32 or int64, got float32"):
        tf.nn.embedding_lookup(emb, tf.constant([1.0]))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bytes_from_ps(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("distflow_tensor_bytes_received_total") and 'peer="/job:ps' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def _start_two_ps_and_a_worker():
    """An in-process cluster of 2 ps tasks and 1 worker, started: (its
    ClusterSpec, the servers, the worker's /metrics port)."""
    jobs = distflow._distflow.local_cluster_spec(2, 1)
    cluster = tf.train.ClusterSpec({j: [t[i] for i in sorted(t)] for j, t in jobs.items()})
    port = _free_port()
    servers = [distflow._distflow.Server(cluster._jobs, "ps", i, -1) for i in range(2)]
    servers.append(distflow._distflow.Server(cluster._jobs, "worker", 0, port))
    for s in servers:
        s.start()
    return cluster, servers, port


def test_sharded_embedding_on_two_ps_trains_and_moves_only_looked_up_rows():
    rows, dim, batch = 20000, 16, 8
    cluster, servers, port = _start_two_ps_and_a_worker()
    try:
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
            shards = [tf.get_variable(f"emb/part_{k}", [rows // 2, dim],
                                      initializer=tf.random_uniform_initializer(-0.1, 0.1, seed=k))
                      for k in range(2)]
            ids = tf.placeholder(tf.int64, [None])
            target = tf.placeholder(tf.float32, [None, dim])
            looked_up = tf.nn.embedding_lookup(shards, ids)
            loss = tf.reduce_mean(tf.reduce_sum(tf.square(looked_up - target), axis=1))
            train = tf.train.GradientDescentOptimizer(2.0).minimize(loss)
        assert shards[0].device.startswith("/job:ps/task:0") and shards[1].device.startswith("/job:ps/task:1")
        rng = np.random.RandomState(3)
        fixed_ids = rng.randint(0, rows, size=batch)
        tgt = np.ones((batch, dim), np.float32)
        with tf.Session(servers[2].target) as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run(loss, feed_dict={ids: fixed_ids, target: tgt})
            sess.run(train, feed_dict={ids: fixed_ids, target: tgt})  # plans the step
            before = _bytes_from_ps(port)
            steps = 5
            for _ in range(steps):
                sess.run(train, feed_dict={ids: fixed_ids, target: tgt})
            per_step = (_bytes_from_ps(port) - before) / steps
            last = sess.run(loss, feed_dict={ids: fixed_ids, target: tgt})
            assert last < 0.1 * first, (first, last)
            row_bytes = batch * dim * 4
            table_bytes = rows * dim * 4
            # Rows and scalars come back; the table (1.28 MB) never does.
            assert 0 < per_step < 8 * row_bytes + 4096, (per_step, row_bytes)
            assert per_step < table_bytes / 50, (per_step, table_bytes)
            # A bad id fails its step naming the task, the op and the id (the
            # shard's own row: 39999 is row 19999 of shard 1 under "mod");
            # the ps keeps serving.
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"job:ps/replica:0/task:1.*Gather.*indices\[0\] = 19999 is not in \[0, 10000\)"):
                sess.run(train, feed_dict={ids: [2 * rows - 1], target: tgt[:1]})
            after_bad = sess.run(loss, feed_dict={ids: fixed_ids, target: tgt})
            assert after_bad == pytest.approx(last)
    finally:
        for s in servers:
            s.stop()


def _rpcs_handled(port, method):
    """RPCs of `method` answered by this process's servers (the metrics are
    the process's, whichever task's port serves them)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("distflow_rpc_server_handled_total{") and f'/{method}"' in line)


def test_sharded_training_step_makes_three_receives_and_two_run_graphs():
    """The example's step (a table in 2 parts on 2 ps tasks, a dense layer,
    Adagrad, the global step) on an in-process cluster: per step one
    RunGraph per ps, and 3 RecvTensor calls: each ps fetches the gradients
    the worker computes for it (a bundle), and that call carries the rows
    and weights the ps looked up for the worker (a push: the worker makes no
    call for them; 5 calls before), plus the token that lets the global
    step's increment on ps 0 wait for ps 1's updates. The optimizers' gate
    sends no tokens between the ps tasks (6 calls before that): a shard's
    gradient values are a Reshape of the worker's rows, and the other
    shard's updates wait for the worker's op, whose tensor reaches them
    anyway."""
    cluster, servers, port = _start_two_ps_and_a_worker()
    try:
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
            global_step = tf.train.get_or_create_global_step()
            table = tf.get_variable("emb", [1000, 8], initializer=tf.random_uniform_initializer(-0.05, 0.05),
                                    partitioner=tf.fixed_size_partitioner(2))
            ids = tf.placeholder(tf.int64, [None, 4])
            labels = tf.placeholder(tf.float32, [None, 1])
            rows = tf.nn.embedding_lookup(table, ids, partition_strategy="div")
            logits = tf.layers.dense(tf.reduce_mean(rows, axis=1), 1)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
            train = tf.train.AdagradOptimizer(0.5).minimize(loss, global_step=global_step)
        rng = np.random.RandomState(4)
        feed = {ids: rng.randint(0, 1000, (16, 4)), labels: (rng.rand(16, 1) > 0.5).astype(np.float32)}
        with tf.Session(servers[2].target) as sess:
            sess.run(tf.global_variables_initializer())
            first = sess.run([train, global_step, loss], feed)[2]  # plans the step
            recv, run_graph = _rpcs_handled(port, "RecvTensor"), _rpcs_handled(port, "RunGraph")
            steps = 10
            for _ in range(steps):
                last = sess.run([train, global_step, loss], feed)[2]
            recv = (_rpcs_handled(port, "RecvTensor") - recv) / steps
            run_graph = (_rpcs_handled(port, "RunGraph") - run_graph) / steps
            step = sess.run(global_step)
        assert step == steps + 1 and last < first, (step, first, last)
        assert 0 < recv <= 3, recv
        assert 0 < run_graph <= 2, run_graph
    finally:
        for s in servers:
            s.stop()


def _tensor_bytes(port):
    """Tensor bytes sent and received between tasks, over this process's
    servers (one process's metrics, whichever task's port serves them)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(("distflow_tensor_bytes_sent_total", "distflow_tensor_bytes_received_total")))


@pytest.mark.parametrize("rows", [2000, 200000])
def test_initializers_of_variables_on_ps_run_on_the_ps(rows):
    """get_variable's initializer function (a partitioned table's parts
    too) runs on the variable's ps, as TF colocates it: the random table is
    drawn there, not on the worker and shipped (200,000 x 16 floats = 12.8
    MB would cross). The bytes moved between the tasks while initialising
    are the same few hundred for a table of 128 KB and one of 12.8 MB, and the
    seeded values are those of a local session."""
    cluster, servers, port = _start_two_ps_and_a_worker()

    def build():
        table = tf.get_variable("emb", [rows, 16], initializer=tf.random_uniform_initializer(-0.1, 0.1, seed=7),
                                partitioner=tf.fixed_size_partitioner(2))
        w = tf.get_variable("w", [16, 4], initializer=tf.truncated_normal_initializer(seed=8))
        return table, w

    try:
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
            table, w = build()
        g = tf.get_default_graph()
        parts = list(table)
        assert parts[0].device.startswith("/job:ps/task:0") and parts[1].device.startswith("/job:ps/task:1")
        elsewhere = []
        for v in parts + [w]:
            init_ops = [op for op in g.get_operations() if op.name.startswith(v.op.name + "/")]
            assert len(init_ops) >= 3, [op.name for op in init_ops]  # the random op, its scaling, the Assign
            elsewhere += [(op.name, op.device) for op in init_ops if op.device != v.device]
        with tf.Session(servers[2].target) as sess:
            before = _tensor_bytes(port)
            sess.run(tf.global_variables_initializer())
            moved = _tensor_bytes(port) - before
            got = sess.run([tf.convert_to_tensor(table), w])
    finally:
        for s in servers:
            s.stop()
    assert moved < 4096, (moved, rows * 16 * 4)
    assert not elsewhere, elsewhere
    tf.reset_default_graph()
    table, w = build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        want = sess.run([tf.convert_to_tensor(table), w])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_variable_with_an_initial_value_function_computes_it_on_the_variables_ps():
    """tf.Variable(callable): the function's ops are colocated with the
    variable (TF's "loc:@" class) and placed with it, whatever the caller's
    device scope: a 200,000 x 16 random table (12.8 MB) on a ps is drawn
    there, so initialising moves a few hundred bytes, and its seeded values
    are a local session's."""
    cluster, servers, port = _start_two_ps_and_a_worker()

    def build():
        t = tf.Variable(lambda: tf.random_uniform([200000, 16], -0.1, 0.1, seed=3), name="table")
        return t, tf.Variable(lambda: tf.ones([3]) * 2.0)

    try:
        with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
            table, small = build()
        assert table.device.startswith("/job:ps/task:0") and small.device.startswith("/job:ps/task:1")
        g = tf.get_default_graph()
        init_ops = [op for op in g.get_operations() if op.name.startswith("table/Initializer/")]
        assert init_ops and all(op.device == "" for op in init_ops), [(op.name, op.device) for op in init_ops]
        with tf.Session(servers[2].target) as sess:
            before = _tensor_bytes(port)
            sess.run(tf.global_variables_initializer())
            moved = _tensor_bytes(port) - before
            got = sess.run([table, small])
    finally:
        for s in servers:
            s.stop()
    assert moved < 4096, moved
    np.testing.assert_array_equal(got[1], [2.0, 2.0, 2.0])
    tf.reset_default_graph()
    table, small = build()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(got[0], sess.run(table))


def test_partitioners_split_like_tensorflow():
    assert tf.fixed_size_partitioner(3)(shape=[10, 4], dtype=tf.float32) == [3, 1]
    assert tf.fixed_size_partitioner(5)(shape=[2, 4], dtype=tf.float32) == [2, 1]
    # 1000 x 64 floats = 256000 bytes: 4 slices of >= 64000 bytes, capped at 3.
    assert tf.min_max_variable_partitioner(3, min_slice_size=64000)(shape=[1000, 64], dtype=tf.float32) == [3, 1]
    assert tf.min_max_variable_partitioner(8, min_slice_size=64000)(shape=[1000, 64], dtype=tf.float32) == [4, 1]
    # rows of 256 bytes, at most 10 rows (2560 bytes) per shard: 100 rows -> 10 shards.
    assert tf.variable_axis_size_partitioner(2560)(shape=[100, 64], dtype=tf.float32) == [10, 1]
    assert tf.variable_axis_size_partitioner(2560, max_shards=4)(shape=[100, 64], dtype=tf.float32) == [4, 1]


def test_partitioned_variable_parts_on_ps_tasks_and_div_lookup():
    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:1", "127.0.0.1:2"], "worker": ["127.0.0.1:3"]})
    full = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0", cluster=cluster)):
        emb = tf.get_variable("emb", shape=[7, 3], initializer=full, partitioner=tf.fixed_size_partitioner(3))
    assert isinstance(emb, tf.PartitionedVariable) and len(emb) == 3
    assert [v.op.name for v in emb] == ["emb/part_0", "emb/part_1", "emb/part_2"]
    assert [v.shape.as_list() for v in emb] == [[3, 3], [2, 3], [2, 3]]
    assert [v.device.split("/device")[0] for v in emb] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:0"]
    assert [v._save_slice_info.spec for v in emb] == ["7 3 0,3:0,3", "7 3 3,2:0,3", "7 3 5,2:0,3"]
    with pytest.raises(ValueError, match="already exists"):
        tf.get_variable("emb", shape=[7, 3], partitioner=tf.fixed_size_partitioner(3))
    tf.reset_default_graph()
    emb = tf.get_variable("emb", shape=[7, 3], initializer=full, partitioner=tf.fixed_size_partitioner(3))
    ids = np.array([6, 0, 3, 4, 2], np.int32)
    out = tf.nn.embedding_lookup(emb, ids, partition_strategy="div")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, whole = sess.run([out, tf.convert_to_tensor(emb)])
    np.testing.assert_array_equal(got, full[ids])
    np.testing.assert_array_equal(whole, full)


@pytest.mark.parametrize("num_ps,sync", [(1, False), (2, False), (2, True)])
def test_example_trains_under_distflow_launch_and_moves_rows_not_tables(num_ps, sync):
    """examples/python/sparse_embedding.py (a CI-sized table: 20000 x 16)
    on num_ps ps tasks and 2 workers: every task finishes, the chief's mean
    loss over its last 50 steps ends below 0.45 (log 2 = 0.69 at the start),
    and the bytes its task pulls from the ps per step are the looked-up
    rows' (512 rows x 16 floats) within 10%, and those it pushes the
    gradient rows and their ids: 30x+ less than the table either way. With
    --sync_replicas the same holds: the gradient rows go to the sparse
    accumulators on the ps, not a dense table-sized gradient."""
    import os
    import subprocess
    import sys
    source = os.environ.get("DISTFLOW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    build = os.environ.get("DISTFLOW_BUILD_DIR", os.path.join(source, "build"))
    sys.path.insert(0, os.path.join(source, "tests", "py"))
    from ports import free_port
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "python")
    out = subprocess.run([os.path.join(build, "tools", "distflow-launch"), "--ps", str(num_ps), "--workers", "2",
                          "--status_base_port", str(free_port()), "--", sys.executable,
                          os.path.join(source, "examples", "python", "sparse_embedding.py"), "--vocab=20000",
                          "--dim=16", "--last_step=300"] + (["--sync_replicas"] if sync else []),
                         capture_output=True, text=True, timeout=240, env=env)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "[launch] every task finished" in text, text[-3000:]
    loss = float(re.search(r"\[worker:0\] Worker 0: .* final mean loss ([0-9.]+)", text).group(1))
    assert loss < 0.45, text[-3000:]
    pulled, pushed = (float(v) for v in re.search(r"bytes from ps per step: ([0-9]+), to ps: ([0-9]+)", text).groups())
    rows_bytes, table_bytes = 512 * 16 * 4, 20000 * 16 * 4
    assert rows_bytes <= pulled < 1.1 * rows_bytes, (pulled, rows_bytes)
    # Pushed: the gradient rows and their int64 ids (512 x 8 bytes).
    assert rows_bytes <= pushed < 1.3 * rows_bytes, (pushed, rows_bytes)
    assert table_bytes / max(pulled, pushed) > 30, (pulled, pushed, table_bytes)


def _model(parts, init):
    emb = tf.get_variable("emb", [7, 3], initializer=init, partitioner=tf.fixed_size_partitioner(parts))
    w = tf.get_variable("w", [2], initializer=np.array([1.0, 2.0], np.float32))
    loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(emb, [0, 6, 3, 6], partition_strategy="div"))) + \
        tf.reduce_sum(w)
    train = tf.train.AdagradOptimizer(0.1).minimize(loss)
    g = tf.get_default_graph()
    accum = tf.concat([g.get_tensor_by_name(f"emb/part_{k}/Adagrad:0") for k in range(parts)], 0)
    return emb, w, train, tf.convert_to_tensor(emb), accum


def test_partitioned_variable_saved_in_2_parts_restores_into_3(tmp_path):
    full = np.arange(21, dtype=np.float32).reshape(7, 3) / 10
    emb, w, train, whole, accum = _model(2, full)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        want_emb, want_accum, want_w = sess.run([whole, accum, w])
        path = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert not np.array_equal(want_emb, full) and not np.allclose(want_accum, 0.1)  # the step changed both
    tf.reset_default_graph()
    emb, w, train, whole, accum = _model(3, np.zeros((7, 3), np.float32))
    assert [v.shape.as_list()[0] for v in emb] == [3, 2, 2]
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.restore(sess, path)
        got_emb, got_accum, got_w = sess.run([whole, accum, w])
    np.testing.assert_array_equal(got_emb, want_emb)
    np.testing.assert_array_equal(got_accum, want_accum)
    np.testing.assert_array_equal(got_w, want_w)
    # A checkpoint of another shape is still refused, naming the difference.
    tf.reset_default_graph()
    tf.get_variable("emb", [8, 3], partitioner=tf.fixed_size_partitioner(3))
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.FailedPreconditionError,
                           match=r"a slice of 'emb' of shape \[8,3\] in the model, but the checkpoint's 'emb' has "
                                 r"shape \[7,3\]"):
            saver.restore(sess, path)

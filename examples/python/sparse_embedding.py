# A CTR-style sparse model on parameter servers: each example is a bag of
# feature ids (drawn from a power law over --vocab ids, as clicks and words
# are) and a label; the model is an embedding table of --vocab x --dim rows,
# sharded over the ps tasks (get_variable with fixed_size_partitioner; the
# replica_device_setter puts the shards round-robin on the ps tasks), the
# mean of the looked-up rows, a logistic layer, and Adagrad. Ids go to the
# shards by --partition_strategy ("mod" by default: id i to part i mod the
# number of parts, which spreads power-law ids evenly). Each step sends
# its ids to the shards that own them and only those rows come back; the
# gradient is an IndexedSlices applied on the ps by SparseApplyAdagrad.
# The data are generated: id i has a hidden weight +1 or -1 (a hash of i) and
# the label is whether the bag's hidden weights sum above zero.
#
#   build/tools/distflow-launch --ps 2 --workers 2 --status_base_port 8000 -- \
#       /usr/bin/python3 examples/python/sparse_embedding.py --vocab=1000000 --dim=64
# (PYTHONPATH=build/python). The ps tasks are distflow-servers; the workers
# train asynchronously (--sync_replicas: synchronously, every worker's
# gradient rows averaged in each step) until the global step reaches
# --last_step; the chief
# prints the loss and, with --status_port, the bytes its task received from
# the ps per step (from its /metrics) next to the table's size.
import json
import os
import time
import urllib.request

import numpy as np

import distflow.compat.v1 as tf

tf.app.flags.DEFINE_string("job_name", "worker", "'ps' or 'worker' (distflow-launch passes it)")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job")
tf.app.flags.DEFINE_string("cluster_spec", "", "ignored: the cluster is read from DISTFLOW_CONFIG")
tf.app.flags.DEFINE_integer("status_port", 0, "serve /status and /metrics on this port (0: none)")
tf.app.flags.DEFINE_integer("vocab", 1000000, "rows of the embedding table")
tf.app.flags.DEFINE_integer("dim", 64, "columns of the embedding table")
tf.app.flags.DEFINE_integer("ids_per_example", 8, "feature ids in each example's bag")
tf.app.flags.DEFINE_integer("batch_size", 64, "examples per step")
tf.app.flags.DEFINE_integer("last_step", 300, "train until the global step reaches this")
tf.app.flags.DEFINE_float("learning_rate", 0.5, "Adagrad's learning rate")
tf.app.flags.DEFINE_integer("measure_from", 20, "local step where the steady-state window (steps/s, bytes) starts")
tf.app.flags.DEFINE_integer("measure_steps", 40, "length of that window in local steps")
tf.app.flags.DEFINE_bool("sync_replicas", False, "synchronous training: each step averages every worker's "
                         "gradient (SyncReplicasOptimizer; the table's gradients are aggregated as rows)")
tf.app.flags.DEFINE_string("partition_strategy", "mod", "embedding_lookup's: 'mod' (id i in part i %% parts: "
                           "power-law ids spread evenly over the ps tasks) or 'div' (contiguous ranges: the "
                           "frequent low ids all on the first ps)")
tf.app.flags.DEFINE_bool("dense_lookup", False, "the dense equivalent, for comparison: read the whole table "
                         "on the worker (tf.gather of the concatenated parts) and update it densely")
FLAGS = tf.app.flags.FLAGS


def hidden_weight(ids):
    return np.where((ids * 2654435761 % 2 ** 32) % 2 == 0, 1.0, -1.0)


def batch(rng):
    ids = np.minimum(rng.zipf(1.3, size=(FLAGS.batch_size, FLAGS.ids_per_example)) - 1, FLAGS.vocab - 1)
    labels = (hidden_weight(ids).sum(axis=1) > 0).astype(np.float32).reshape(-1, 1)
    return ids.astype(np.int64), labels


def bytes_with_ps(port):
    """(bytes this task received from the ps tasks, bytes it sent them), from its /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    def total(metric):
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(metric) and 'peer="/job:ps' in line)
    return np.array([total("distflow_tensor_bytes_received_total"), total("distflow_tensor_bytes_sent_total")])


def main(_):
    config = json.loads(os.environ.get("DISTFLOW_CONFIG", "{}"))
    jobs = config.get("cluster") or {"ps": ["localhost:2222"], "worker": ["localhost:2223"]}
    cluster = tf.train.ClusterSpec(jobs)
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index,
                             status_port=FLAGS.status_port or -1)
    if FLAGS.job_name == "ps":
        server.join()
        return
    num_ps = cluster.num_tasks("ps")
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % FLAGS.task_index,
                                                  cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        table = tf.get_variable("embedding", [FLAGS.vocab, FLAGS.dim],
                                initializer=tf.random_uniform_initializer(-0.05, 0.05),
                                partitioner=tf.fixed_size_partitioner(num_ps))
        ids = tf.placeholder(tf.int64, [None, FLAGS.ids_per_example], name="ids")
        labels = tf.placeholder(tf.float32, [None, 1], name="labels")
        if FLAGS.dense_lookup:
            rows = tf.gather(tf.convert_to_tensor(table), ids)
        else:
            rows = tf.nn.embedding_lookup(table, ids, partition_strategy=FLAGS.partition_strategy)
        bag = tf.reduce_mean(rows, axis=1)
        logits = tf.layers.dense(bag, 1)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
        opt = tf.train.AdagradOptimizer(FLAGS.learning_rate)
        if FLAGS.sync_replicas:
            num_workers = cluster.num_tasks("worker")
            opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=num_workers,
                                                 total_num_replicas=num_workers)
        train_op = opt.minimize(loss, global_step=global_step)
    rng = np.random.RandomState(1000 + FLAGS.task_index)
    chief = FLAGS.task_index == 0
    losses, local_steps, measured, steady = [], 0, None, float("nan")
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.last_step)]
    if FLAGS.sync_replicas:
        hooks.append(opt.make_session_run_hook(chief))
    start = time.time()
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=chief, hooks=hooks) as sess:
        while not sess.should_stop():
            x, y = batch(rng)
            if local_steps == FLAGS.measure_from:
                t20 = time.time()
                if chief and FLAGS.status_port:
                    before, mark = bytes_with_ps(FLAGS.status_port), local_steps
            _, step, l = sess.run([train_op, global_step, loss], {ids: x, labels: y})
            losses.append(l)
            local_steps += 1
            if local_steps == FLAGS.measure_from + FLAGS.measure_steps:
                steady = FLAGS.measure_steps / (time.time() - t20)
                if chief and FLAGS.status_port:
                    measured = (bytes_with_ps(FLAGS.status_port) - before) / (local_steps - mark)
            if chief and local_steps % 50 == 0:
                print("step %d loss %.4f (mean of the last 50: %.4f)" % (step, l, np.mean(losses[-50:])),
                      flush=True)
    elapsed = time.time() - start
    print("Worker %d: %d steps in %.1f s (steady state: %.1f steps/s), final mean loss %.4f" %
          (FLAGS.task_index, local_steps, elapsed, steady, np.mean(losses[-50:])), flush=True)
    if measured is not None:
        rows = FLAGS.batch_size * FLAGS.ids_per_example
        print("bytes from ps per step: %.0f, to ps: %.0f (looked-up rows: %d x %d floats = %d bytes; table: %d bytes)" %
              (measured[0], measured[1], rows, FLAGS.dim, rows * FLAGS.dim * 4, FLAGS.vocab * FLAGS.dim * 4),
              flush=True)


if __name__ == "__main__":
    tf.app.run()

# Elastic synchronous training from Python: sync_mnist.py's program with
# distflow's extensions for a job whose workers come and go.
#   python3 elastic_sync_mnist.py --ps_hosts=localhost:2222 \
#       --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
#   python3 elastic_sync_mnist.py ... --job_name=worker --task_index=0   # the chief
#   python3 elastic_sync_mnist.py ... --job_name=worker --task_index=1
#   python3 elastic_sync_mnist.py --join=localhost:2222 --join_as=localhost:2230 --local_steps=100
# The last one is a worker that is not in the cluster spec: it joins the
# running job through its coordinator (ps 0; distflow.elastic.join_cluster),
# which gives it a task index, trains --local_steps steps and leaves.
# Every worker builds its SyncReplicasOptimizer with elastic=True, so the
# chief aggregates as many gradients per step as there are workers in the
# job: 3 while the joined worker is in it, 2 once it has left (or died).
# Each worker trains on shard k of W of the training set (examples k, k+W,
# ...), W the workers in the job and k its place among them
# (distflow.elastic.worker_shard), asked again every --reshard_every_steps
# steps of its own: the live workers' shards are disjoint and cover the
# data once each has asked since the last join or leave.
import distflow.compat.v1 as tf
from distflow import elastic
from distflow.examples.tutorials.mnist import input_data

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the ps tasks")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated host:port of the workers")
tf.app.flags.DEFINE_string("job_name", "", "'ps' or 'worker' (not with --join)")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job (not with --join)")
tf.app.flags.DEFINE_string("join", "", "host:port of the running job's coordinator (ps 0): join it as a new worker")
tf.app.flags.DEFINE_string("join_as", "", "with --join: host:port this worker serves on")
tf.app.flags.DEFINE_integer("local_steps", 0, "leave the job after this many steps of this worker (0: to the end)")
tf.app.flags.DEFINE_integer("train_steps", 200, "global steps to train")
tf.app.flags.DEFINE_integer("batch_size", 100, "examples per worker per step")
tf.app.flags.DEFINE_float("learning_rate", 0.1, "gradient descent step size")
tf.app.flags.DEFINE_string("logdir", "/tmp/elastic_sync_mnist", "the chief's checkpoints")
tf.app.flags.DEFINE_integer("reshard_every_steps", 10,
                            "take this worker's shard of the live workers again every this many local steps "
                            "(0: train on the whole training set)")
FLAGS = tf.app.flags.FLAGS


def main(_):
    # distflow-launch --min_workers/--max_workers tells a joiner in its
    # environment (DISTFLOW_JOIN, DISTFLOW_JOIN_AS); flags given by hand win.
    if not FLAGS.join and elastic.launcher_join():
        FLAGS.join, FLAGS.join_as = elastic.launcher_join()
    if FLAGS.join:
        if not FLAGS.join_as:
            raise SystemExit("--join needs --join_as=host:port, the address this worker serves on")
        # The data first: from its join on, the chief waits for this worker.
        mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
        task_index, cluster = elastic.join_cluster(FLAGS.join, FLAGS.join_as)
        job_name = "worker"
        print("Joined the running job as worker %d" % task_index, flush=True)
    else:
        task_index, job_name = FLAGS.task_index, FLAGS.job_name
        cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
        return
    if not FLAGS.join:
        mnist = input_data.read_data_sets("MNIST_data", one_hot=True)

    # The coordinator keeps the membership: ps task 0.
    coordinator = FLAGS.join or FLAGS.ps_hosts.split(",")[0]
    train, shard = mnist.train, None

    def reshard(step):
        """Takes this worker's shard of the live workers' if it changed."""
        nonlocal train, shard
        try:
            now = elastic.worker_shard(coordinator, task_index)
        except (tf.errors.NotFoundError, tf.errors.UnavailableError, tf.errors.DeadlineExceededError) as e:
            print("Worker %d: keeping shard %s: %s" % (task_index, shard, e), flush=True)
            return
        if now == shard:
            return
        shard = now
        index, count = shard
        train = input_data.DataSet(mnist.train.images[index::count], mnist.train.labels[index::count],
                                   seed=task_index)
        print("Worker %d: training on shard %d of %d (%d examples) from global step %d"
              % (task_index, index, count, train.num_examples, step), flush=True)

    if FLAGS.reshard_every_steps > 0:
        reshard(0)

    is_chief = task_index == 0
    num_workers = cluster.num_tasks("worker")
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % task_index,
                                                  cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y_ = tf.placeholder(tf.float32, [None, 10], name="y_")
        w1 = tf.Variable(tf.truncated_normal([784, 100], stddev=0.1), name="w1")
        b1 = tf.Variable(tf.zeros([100]), name="b1")
        w2 = tf.Variable(tf.truncated_normal([100, 10], stddev=0.1), name="w2")
        b2 = tf.Variable(tf.zeros([10]), name="b2")
        hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
        y = tf.matmul(hidden, w2) + b2
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1)), tf.float32))

        # elastic=True (a distflow extension): the gradients per step follow
        # the workers in the job, as its coordinator counts them.
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
                                             replicas_to_aggregate=num_workers, total_num_replicas=num_workers,
                                             elastic=True)
        train_op = opt.minimize(loss, global_step=global_step)

    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    local_steps = 0
    first_loss = last_loss = None
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                           checkpoint_dir=FLAGS.logdir if is_chief else None,
                                           hooks=hooks) as sess:
        while not sess.should_stop() and (FLAGS.local_steps == 0 or local_steps < FLAGS.local_steps):
            batch_x, batch_y = train.next_batch(FLAGS.batch_size)
            _, step, last_loss = sess.run([train_op, global_step, loss], feed_dict={x: batch_x, y_: batch_y})
            local_steps += 1
            if FLAGS.reshard_every_steps > 0 and local_steps % FLAGS.reshard_every_steps == 0:
                reshard(step)
            if first_loss is None:
                first_loss = last_loss
            if step % 50 == 0:
                print("Worker %d: global step %d, loss %.4f" % (task_index, step, last_loss), flush=True)
        test_acc = sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    print("Worker %d: %d local steps, loss %.4f -> %.4f, test accuracy %.4f"
          % (task_index, local_steps, first_loss, last_loss, test_acc), flush=True)
    if is_chief:
        print("Chief: %d synchronous steps applied; the gradients per step changed %d times, the last step "
              "aggregated %d" % (opt.steps_applied, opt.aggregation_changes, opt.replicas_aggregated), flush=True)
    # Leave the job: the coordinator records this worker as left, not dead.
    server.stop()


if __name__ == "__main__":
    tf.app.run()

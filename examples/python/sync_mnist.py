# Synchronous data-parallel training in TensorFlow 1's idiom:
# tf.train.SyncReplicasOptimizer under tf.train.MonitoredTrainingSession, an
# MLP on (Fashion-)MNIST, started like the seeds' mlp_mnist_dist.py:
#   python3 sync_mnist.py --ps_hosts=localhost:2222 \
#       --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
#   python3 sync_mnist.py ... --job_name=worker --task_index=0   # the chief
#   python3 sync_mnist.py ... --job_name=worker --task_index=1
# Every step averages one gradient from each worker and applies it once, so
# each worker runs as many steps as the global step counts. With TensorFlow,
# only the import lines differ.
import distflow.compat.v1 as tf
from distflow.examples.tutorials.mnist import input_data

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the ps tasks")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated host:port of the workers")
tf.app.flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job")
tf.app.flags.DEFINE_integer("train_steps", 200, "global steps to train")
tf.app.flags.DEFINE_integer("batch_size", 100, "examples per worker per step")
tf.app.flags.DEFINE_float("learning_rate", 0.1, "gradient descent step size")
tf.app.flags.DEFINE_string("logdir", "/tmp/sync_mnist", "checkpoints")
FLAGS = tf.app.flags.FLAGS


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return

    mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
    is_chief = FLAGS.task_index == 0
    with tf.device(tf.train.replica_device_setter(
            worker_device="/job:worker/task:%d" % FLAGS.task_index, cluster=cluster)):
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

        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(FLAGS.learning_rate),
                                             replicas_to_aggregate=len(worker_hosts),
                                             total_num_replicas=len(worker_hosts))
        train_op = opt.minimize(loss, global_step=global_step)

    hooks = [opt.make_session_run_hook(is_chief), tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    local_steps = 0
    first_loss = last_loss = None
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, checkpoint_dir=FLAGS.logdir,
                                           hooks=hooks) as sess:
        while not sess.should_stop():
            batch_x, batch_y = mnist.train.next_batch(FLAGS.batch_size)
            _, step, last_loss = sess.run([train_op, global_step, loss], feed_dict={x: batch_x, y_: batch_y})
            local_steps += 1
            if first_loss is None:
                first_loss = last_loss
            if step % 50 == 0:
                print("Worker %d: global step %d, loss %.4f" % (FLAGS.task_index, step, last_loss), flush=True)
        test_acc = sess.run(accuracy, feed_dict={x: mnist.test.images, y_: mnist.test.labels})
    print("Worker %d: %d local steps, loss %.4f -> %.4f, test accuracy %.4f"
          % (FLAGS.task_index, local_steps, first_loss, last_loss, test_acc), flush=True)
    if is_chief:
        print("Chief: %d synchronous steps applied" % opt.steps_applied, flush=True)


if __name__ == "__main__":
    tf.app.run()

# tf.train.MonitoredTrainingSession as TF 1.x's distributed guide used it:
# checkpoints every N steps to checkpoint_dir, and a job started again with
# the same checkpoint_dir resumes where the last one stopped.
#   python3 mts_mnist.py --ps_hosts=localhost:2222 \
#       --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
#   python3 mts_mnist.py ... --job_name=worker --task_index=0   # the chief
#   python3 mts_mnist.py ... --job_name=worker --task_index=1
# With TensorFlow 1, only the import lines differ.
import distflow.compat.v1 as tf
from distflow.examples.tutorials.mnist import input_data

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the ps tasks")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated host:port of the workers")
tf.app.flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job")
tf.app.flags.DEFINE_integer("last_step", 200, "train until the global step reaches this")
tf.app.flags.DEFINE_string("checkpoint_dir", "/tmp/mts_mnist", "checkpoints and summaries")
FLAGS = tf.app.flags.FLAGS


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % FLAGS.task_index,
                                                  cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 784])
        y_ = tf.placeholder(tf.float32, [None, 10])
        hidden = tf.layers.dense(x, 64, activation=tf.nn.relu)
        logits = tf.layers.dense(hidden, 10)
        loss = tf.losses.softmax_cross_entropy(y_, logits)
        tf.summary.scalar("loss", loss)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.last_step)]
    first = None
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=FLAGS.task_index == 0,
                                           checkpoint_dir=FLAGS.checkpoint_dir, hooks=hooks,
                                           save_checkpoint_steps=50, save_summaries_steps=20) as sess:
        while not sess.should_stop():
            batch_x, batch_y = mnist.train.next_batch(50)
            _, step, l = sess.run([train_op, global_step, loss], {x: batch_x, y_: batch_y})
            first = step if first is None else first
    print("Worker %d: global steps %d..%d, loss %.4f" % (FLAGS.task_index, first, step, l), flush=True)


if __name__ == "__main__":
    tf.app.run()

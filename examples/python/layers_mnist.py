# A TF1 program in the form most TensorFlow 1.4+ users wrote: tf.layers for
# the model, tf.losses with a regularizer, tf.metrics.accuracy (local
# variables), a decaying learning rate and a tf.train.Supervisor on a
# ps/worker cluster, one process per task:
#   python3 layers_mnist.py --ps_hosts=localhost:2222 \
#       --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
#   python3 layers_mnist.py ... --job_name=worker --task_index=0   # the chief
#   python3 layers_mnist.py ... --job_name=worker --task_index=1
# With TensorFlow 1, only the import lines differ. Trains on Debian's
# Fashion-MNIST when MNIST_data holds no data set.
import distflow.compat.v1 as tf
from distflow.examples.tutorials.mnist import input_data

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the ps tasks")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated host:port of the workers")
tf.app.flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job")
tf.app.flags.DEFINE_integer("train_steps", 300, "global steps to train")
tf.app.flags.DEFINE_integer("batch_size", 64, "examples per worker per step")
tf.app.flags.DEFINE_string("logdir", "/tmp/layers_mnist", "checkpoints and summaries")
FLAGS = tf.app.flags.FLAGS


def model(images, training):
    x = tf.reshape(images, [-1, 28, 28, 1])
    x = tf.layers.conv2d(x, 16, 5, padding="same", activation=tf.nn.relu)
    x = tf.layers.max_pooling2d(x, 2, 2)
    x = tf.layers.batch_normalization(x, training=training)
    x = tf.layers.flatten(x)
    x = tf.layers.dense(x, 128, activation=tf.nn.relu,
                        kernel_regularizer=tf.contrib.layers.l2_regularizer(1e-4))
    x = tf.layers.dropout(x, rate=0.25, training=training)
    return tf.layers.dense(x, 10)


def main(_):
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    mnist = input_data.read_data_sets("MNIST_data", one_hot=False)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % FLAGS.task_index,
                                                  cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        images = tf.placeholder(tf.float32, [None, 784], name="images")
        labels = tf.placeholder(tf.int64, [None], name="labels")
        training = tf.placeholder_with_default(False, [], name="training")
        logits = model(images, training)
        tf.losses.sparse_softmax_cross_entropy(labels, logits)
        loss = tf.losses.get_total_loss()
        learning_rate = tf.train.exponential_decay(0.002, global_step, 100, 0.8, staircase=True)
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss, global_step=global_step)
    # The streaming accuracy's counters are this worker's own (local variables).
    with tf.device("/job:worker/task:%d" % FLAGS.task_index):
        accuracy, accuracy_update = tf.metrics.accuracy(labels, tf.argmax(logits, 1))

    sv = tf.train.Supervisor(is_chief=is_chief, logdir=FLAGS.logdir, global_step=global_step,
                             init_op=tf.global_variables_initializer(), save_model_secs=600)
    with sv.managed_session(server.target) as sess:
        step, first_loss, last_loss, local = 0, None, None, 0
        while not sv.should_stop() and step < FLAGS.train_steps:
            x, y = mnist.train.next_batch(FLAGS.batch_size)
            _, last_loss, step = sess.run([train_op, loss, global_step],
                                          {images: x, labels: y, training: True})
            first_loss = last_loss if first_loss is None else first_loss
            local += 1
        # A streaming accuracy over the test set, batch by batch, in this
        # worker's local variables (each worker counts its own).
        for i in range(0, 2000, 500):
            sess.run(accuracy_update, {images: mnist.test.images[i:i + 500], labels: mnist.test.labels[i:i + 500]})
        print("Worker %d: %d local steps, loss %.4f -> %.4f, test accuracy %.4f" %
              (FLAGS.task_index, local, first_loss, last_loss, sess.run(accuracy)), flush=True)
    sv.stop()


if __name__ == "__main__":
    tf.app.run()

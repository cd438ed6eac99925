# Synchronous training as TF 1.0-1.3 programs wrote it before
# MonitoredTrainingSession: SyncReplicasOptimizer with its token-queue ops
# (chief_init_op, local_step_init_op, ready_for_local_init_op, the chief's
# queue runner and init tokens op) handed to a tf.train.Supervisor.
#   python3 sync_token_queue.py --ps_hosts=localhost:2222 \
#       --worker_hosts=localhost:2223,localhost:2224 --job_name=ps --task_index=0
#   python3 sync_token_queue.py ... --job_name=worker --task_index=0   # the chief
#   python3 sync_token_queue.py ... --job_name=worker --task_index=1
# With TensorFlow 1, only the import lines differ; distflow maps the token
# queue onto its barrier, so each global step still averages one gradient
# from every worker.
import distflow.compat.v1 as tf
from distflow.examples.tutorials.mnist import input_data

tf.app.flags.DEFINE_string("ps_hosts", "localhost:2222", "comma-separated host:port of the ps tasks")
tf.app.flags.DEFINE_string("worker_hosts", "localhost:2223,localhost:2224", "comma-separated host:port of the workers")
tf.app.flags.DEFINE_string("job_name", "", "'ps' or 'worker'")
tf.app.flags.DEFINE_integer("task_index", 0, "index of the task in its job")
tf.app.flags.DEFINE_integer("train_steps", 100, "global steps to train")
tf.app.flags.DEFINE_string("logdir", "/tmp/sync_token_queue", "checkpoints")
FLAGS = tf.app.flags.FLAGS


def main(_):
    worker_hosts = FLAGS.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": FLAGS.ps_hosts.split(","), "worker": worker_hosts})
    server = tf.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_index)
    if FLAGS.job_name == "ps":
        server.join()
        return
    is_chief = FLAGS.task_index == 0
    mnist = input_data.read_data_sets("MNIST_data", one_hot=True)
    with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:%d" % FLAGS.task_index,
                                                  cluster=cluster)):
        global_step = tf.Variable(0, name="global_step", trainable=False)
        x = tf.placeholder(tf.float32, [None, 784])
        y_ = tf.placeholder(tf.float32, [None, 10])
        w = tf.Variable(tf.zeros([784, 10]))
        b = tf.Variable(tf.zeros([10]))
        y = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.5),
                                             replicas_to_aggregate=len(worker_hosts),
                                             total_num_replicas=len(worker_hosts), name="mnist_sync_replicas")
        train_step = opt.minimize(loss, global_step=global_step)
        local_init_op = opt.chief_init_op if is_chief else opt.local_step_init_op
        ready_for_local_init_op = opt.ready_for_local_init_op
        chief_queue_runner = opt.get_chief_queue_runner()
        sync_init_op = opt.get_init_tokens_op()
        init_op = tf.global_variables_initializer()

    sv = tf.train.Supervisor(is_chief=is_chief, logdir=FLAGS.logdir, init_op=init_op, local_init_op=local_init_op,
                             ready_for_local_init_op=ready_for_local_init_op, recovery_wait_secs=1,
                             global_step=global_step)
    sess = sv.prepare_or_wait_for_session(server.target)
    if is_chief:
        sess.run(sync_init_op)
        sv.start_queue_runners(sess, [chief_queue_runner])
    local_step = 0
    while True:
        batch_x, batch_y = mnist.train.next_batch(100)
        _, step = sess.run([train_step, global_step], feed_dict={x: batch_x, y_: batch_y})
        local_step += 1
        if step >= FLAGS.train_steps:
            break
    print("Worker %d: %d local steps, global step %d" % (FLAGS.task_index, local_step, step), flush=True)
    if is_chief:
        print("Chief: %d synchronous steps applied" % opt.steps_applied, flush=True)
    sv.stop()


if __name__ == "__main__":
    tf.app.run()
